"""Fixtures for the infrastructure tier: one synthesis per stage per session.

The first thing the tier synthesises, whichever test asks first, is prod through the real CLI
(``bash infra/cdk.sh synth prod``, stdout piped) into an empty bundle cache of this session, as
a fresh machine would: ``cold_prod_synth``. The Lambda dependencies are built for arm64 once,
there; every in-process synthesis after it reuses that cache.

The CDK app is synthesised in-process (jsii starts once) with cdk-nag AwsSolutions enabled, so a
fixture that returns at all means the nag checks passed. Templates are then plain JSON dicts.
"""

from __future__ import annotations

import os
import subprocess
import sys
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import pytest

os.environ.setdefault("JSII_SILENCE_WARNING_END_OF_LIFE_NODE_VERSION", "20")
os.environ.setdefault("CDK_DISABLE_VERSION_CHECK", "1")
os.environ.setdefault("CDK_DISABLE_CLI_TELEMETRY", "true")

from infra.bundling import REPO_ROOT
from infra.config import LAMBDA_FUNCTIONS
from infra.console_assets import ASSETS_ENV
from tests.infrastructure.synth import CONSOLE_FIXTURE, Synthesized, synthesize

STUB_HANDLER = '''"""Stand-in for the infrastructure tests until functions/{name} exists."""
import engram
import pydantic_core


def handler(event, context):
    return {{"statusCode": 200, "body": "{name}"}}
'''


def missing_functions(root: Path = REPO_ROOT) -> list[str]:
    return [n for n in LAMBDA_FUNCTIONS if not (root / "functions" / n / "handler.py").is_file()]


@pytest.fixture(scope="session")
def repo_root(tmp_path_factory: pytest.TempPathFactory) -> Path:
    """The checkout; while some ``functions/<name>/handler.py`` do not exist yet, a view of it
    (symlinks) where only the missing handlers are stand-ins, so the infrastructure is still
    synthesised and checked. Real handlers are always used where they exist."""
    missing = missing_functions()
    if not missing:
        return REPO_ROOT
    view = tmp_path_factory.mktemp("repo-view")
    for entry in ("shared", "infra", "uv.lock", "pyproject.toml", "cdk.json"):
        (view / entry).symlink_to(REPO_ROOT / entry)
    functions = view / "functions"
    functions.mkdir()
    for name in LAMBDA_FUNCTIONS:
        if name in missing:
            (functions / name).mkdir()
            (functions / name / "handler.py").write_text(STUB_HANDLER.format(name=name))
        else:
            (functions / name).symlink_to(REPO_ROOT / "functions" / name)
    if (REPO_ROOT / "functions" / "__init__.py").is_file():
        (functions / "__init__.py").symlink_to(REPO_ROOT / "functions" / "__init__.py")
    return view


OFFLINE_ENV = {
    # No AWS credentials or config of any kind.
    "AWS_CONFIG_FILE": "/nonexistent/aws-config",
    "AWS_SHARED_CREDENTIALS_FILE": "/nonexistent/aws-credentials",
    "AWS_EC2_METADATA_DISABLED": "true",
    # Any attempt to use Docker fails loudly.
    "CDK_DOCKER": "/bin/false",
    "CDK_DISABLE_VERSION_CHECK": "1",
    "CDK_DISABLE_CLI_TELEMETRY": "true",
    "JSII_SILENCE_WARNING_END_OF_LIFE_NODE_VERSION": "20",
}


@dataclass(frozen=True)
class CliSynth:
    """``bash infra/cdk.sh synth <stage>`` as a fresh machine runs it."""

    result: subprocess.CompletedProcess[str]
    outdir: Path
    cache: Path
    cache_was_empty: bool


def cli_synth(repo_root: Path, stage: str, outdir: Path, cache: Path) -> CliSynth:
    """The real CLI, offline, stdout and stderr piped (no terminal), colours not disabled."""
    env = {
        k: v
        for k, v in os.environ.items()
        if not k.startswith(("AWS_", "CDK_")) and k not in ("NO_COLOR", "FORCE_COLOR")
    }
    env.update(OFFLINE_ENV)
    env["CDK_OUTDIR"] = str(outdir)
    env["ENGRAM_BUNDLE_CACHE"] = str(cache)
    env[ASSETS_ENV] = str(CONSOLE_FIXTURE)  # the console's build is the console's tests' concern
    # The Makefile runs this under `uv run`; here the test's interpreter is the venv's python.
    env["PATH"] = f"{Path(sys.executable).parent}{os.pathsep}{env.get('PATH', '')}"
    was_empty = not cache.exists() or not any(cache.iterdir())
    result = subprocess.run(
        ["bash", "infra/cdk.sh", "synth", stage],
        cwd=repo_root,
        env=env,
        capture_output=True,
        text=True,
        timeout=600,  # a cold build downloads the locked wheels
        check=False,
    )
    return CliSynth(result, outdir, cache, was_empty)


@pytest.fixture(scope="session")
def bundle_cache(tmp_path_factory: pytest.TempPathFactory) -> Path:
    """This session's Lambda bundle cache, empty until ``cold_prod_synth`` fills it."""
    return tmp_path_factory.mktemp("bundle-cache")


@pytest.fixture(scope="session")
def cold_prod_synth(
    repo_root: Path, bundle_cache: Path, tmp_path_factory: pytest.TempPathFactory
) -> CliSynth:
    return cli_synth(
        repo_root, "prod", tmp_path_factory.mktemp("cli-prod") / "cdk.out", bundle_cache
    )


@pytest.fixture(scope="session")
def synth_cache(
    repo_root: Path,
    tmp_path_factory: pytest.TempPathFactory,
    cold_prod_synth: CliSynth,
    bundle_cache: Path,
) -> Any:
    """In-process syntheses by stage name (or config), after the cold CLI synthesis."""
    cache: dict[tuple[bool, str], Synthesized] = {}

    def get(stage: Any) -> Synthesized:
        name = stage if isinstance(stage, str) else stage.name
        key = (isinstance(stage, str), name)
        if key not in cache:
            outdir = tmp_path_factory.mktemp(f"cdk-{name}")
            cache[key] = synthesize(stage, repo_root, outdir, cache=bundle_cache)
        return cache[key]

    return get


@pytest.fixture(scope="session")
def prod(synth_cache: Any) -> Synthesized:
    result: Synthesized = synth_cache("prod")
    return result


@pytest.fixture(scope="session")
def dev(synth_cache: Any) -> Synthesized:
    result: Synthesized = synth_cache("dev")
    return result
