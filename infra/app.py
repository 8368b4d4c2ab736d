"""The Engram CDK app. ``cdk synth -c stage=dev|staging|prod`` (see ``infra/cdk.sh``).

Run as a module from the repository root (``python -m infra.app``, as ``cdk.json`` does) so
that ``infra.constructs`` never shadows the ``constructs`` library.
"""

from __future__ import annotations

import json
import sys
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path
from typing import Any, Literal, TypeVar

from aws_cdk import App, Stack, Tags

from infra.bundling import REPO_ROOT
from infra.config import LAMBDA_FUNCTIONS, StageConfig, stage_config
from infra.console_assets import ConsoleBuildError, console_assets
from infra.constructs.nag import enable_aws_solutions
from infra.stacks.data import DataStack
from infra.stacks.monitoring import MonitoringStack
from infra.stacks.network import NetworkStack
from infra.stacks.service import ServiceStack

S = TypeVar("S", bound=Stack)


@dataclass(frozen=True)
class EngramStage:
    """The stacks of one deployed stage."""

    config: StageConfig
    network: NetworkStack
    data: DataStack
    service: ServiceStack
    monitoring: MonitoringStack

    @property
    def stacks(self) -> tuple[Stack, ...]:
        return (self.network, self.data, self.service, self.monitoring)


def build_stage(
    app: App,
    config: StageConfig,
    repo_root: Path = REPO_ROOT,
    *,
    console_assets: Path | None = None,
) -> EngramStage:
    """Add the four stacks of ``config``'s stage to ``app`` (env-agnostic: no lookups);
    ``console_assets``: the console's AWS build the service stack hosts (none: no console)."""
    protect = config.deletion_protection

    def stack(kind: Callable[..., S], name: str, what: str, **kwargs: Any) -> S:
        """``Engram-<stage>-<name>``, described as holding ``what``."""
        description = f"Engram {config.name}: {what}"
        return kind(
            app, f"Engram-{config.name}-{name}", config=config, description=description, **kwargs
        )

    network = stack(NetworkStack, "Network", "VPC and endpoints", termination_protection=protect)
    data = stack(
        DataStack,
        "Data",
        "Aurora PostgreSQL, RDS Proxy, ElastiCache",
        vpc=network.vpc,
        functions_sg=network.functions_sg,
        endpoints_sg=network.endpoints_sg,
        termination_protection=protect,
    )
    service = stack(
        ServiceStack,
        "Service",
        "functions, HTTP API, Cognito, queues, schedules",
        repo_root=repo_root,
        vpc=network.vpc,
        functions_sg=network.functions_sg,
        data=data.endpoints,
        console_assets=console_assets,
        termination_protection=protect,
    )
    monitoring = stack(
        MonitoringStack, "Monitoring", "alarms and dashboard", service=service, data=data
    )
    # CloudFormation rejects tags on proxy target groups although CDK offers them.
    untaggable = ["AWS::RDS::DBProxyTargetGroup"]
    Tags.of(app).add("project", "engram", exclude_resource_types=untaggable)
    Tags.of(app).add("engram:stage", config.name, exclude_resource_types=untaggable)
    return EngramStage(config, network, data, service, monitoring)


def create_app(
    stage: str | StageConfig,
    *,
    repo_root: Path = REPO_ROOT,
    outdir: str | None = None,
    nag: bool = True,
    console: Path | Literal["auto"] | None = "auto",
) -> tuple[App, EngramStage]:
    """An app holding one stage (a name in ``STAGES``, or a config), with cdk-nag AwsSolutions
    checks on synthesis. ``console``: the console's AWS build to host; ``"auto"`` finds or
    builds it (``infra.console_assets``), None leaves the console out."""
    context = json.loads((REPO_ROOT / "cdk.json").read_text()).get("context", {})
    app = App(outdir=outdir, context=context) if outdir else App(context=context)
    config = stage if isinstance(stage, StageConfig) else stage_config(stage)
    assets = console_assets(repo_root) if console == "auto" else console
    built = build_stage(app, config, repo_root, console_assets=assets)
    if nag:
        enable_aws_solutions(app)
    return app, built


def main() -> int:
    """``cdk synth``'s entry point: the stage named by ``-c stage=<name>``, with cdk-nag."""
    stage = App().node.try_get_context("stage")
    if not stage:
        print("infra: choose a stage with -c stage=dev|staging|prod", file=sys.stderr)
        return 2
    missing = [
        f"functions/{name}/handler.py"
        for name in LAMBDA_FUNCTIONS
        if not (REPO_ROOT / "functions" / name / "handler.py").is_file()
    ]
    if missing:
        print(f"infra: cannot bundle, missing {', '.join(missing)}", file=sys.stderr)
        return 1
    try:
        config = stage_config(str(stage))
    except ValueError as error:
        print(f"infra: {error}", file=sys.stderr)
        return 2
    try:
        app, _ = create_app(config)
    except ConsoleBuildError as error:
        print(f"infra: console: {error}", file=sys.stderr)
        return 1
    app.synth()
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
