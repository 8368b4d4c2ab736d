"""Synthesis helpers shared by the infrastructure tests."""

from __future__ import annotations

import contextlib
import json
import os
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from aws_cdk import Validations
from infra.app import create_app
from infra.config import StageConfig


def ref(value: Any) -> str:
    """The logical id a Ref / Fn::GetAtt points at."""
    if isinstance(value, dict) and "Ref" in value:
        return str(value["Ref"])
    if isinstance(value, dict) and "Fn::GetAtt" in value:
        return str(value["Fn::GetAtt"][0])
    raise AssertionError(f"not a reference: {value!r}")


@dataclass
class Synthesized:
    """One synthesised stage: its cloud assembly directory and the stacks' templates."""

    stage: str
    outdir: Path
    templates: dict[str, dict[str, Any]]
    acknowledgments: list[tuple[str, str, str]]  # (construct path, rule, reason)

    def template(self, layer: str) -> dict[str, Any]:
        return self.templates[f"Engram-{self.stage}-{layer}"]

    def resources(self, type_: str, layer: str | None = None) -> dict[str, dict[str, Any]]:
        found: dict[str, dict[str, Any]] = {}
        for stack, template in self.templates.items():
            if layer is None or stack.endswith(f"-{layer}"):
                for logical_id, resource in template.get("Resources", {}).items():
                    if resource["Type"] == type_:
                        found[logical_id] = resource
        return found


@contextlib.contextmanager
def bundle_cache(path: Path) -> Iterator[None]:
    """``ENGRAM_BUNDLE_CACHE=path`` while the block runs (bundling happens during synthesis)."""
    before = os.environ.get("ENGRAM_BUNDLE_CACHE")
    os.environ["ENGRAM_BUNDLE_CACHE"] = str(path)
    try:
        yield
    finally:
        if before is None:
            os.environ.pop("ENGRAM_BUNDLE_CACHE", None)
        else:
            os.environ["ENGRAM_BUNDLE_CACHE"] = before


CONSOLE_FIXTURE = Path(__file__).parent / "fixtures" / "console-dist-aws"
"""A stand-in for ``console/dist-aws`` (the console's AWS build) that the tests host, so the
infrastructure tier neither needs nor builds the console."""


def synthesize(
    stage: str | StageConfig,
    repo_root: Path,
    outdir: Path,
    *,
    cache: Path | None = None,
    console: Path | None = CONSOLE_FIXTURE,
) -> Synthesized:
    """One stage (by name or config) synthesised in-process; ``cache``: the bundle cache;
    ``console``: the console build hosted (None: no console)."""
    with bundle_cache(cache) if cache else contextlib.nullcontext():
        app, built = create_app(stage, repo_root=repo_root, outdir=str(outdir), console=console)
        app.synth()  # raises if any cdk-nag AwsSolutions finding is not acknowledged
    name = stage.name if isinstance(stage, StageConfig) else stage
    templates = {
        stack.stack_name: json.loads((outdir / f"{stack.stack_name}.template.json").read_text())
        for stack in built.stacks
    }
    key = Validations.ACKNOWLEDGED_RULES_METADATA_KEY
    acknowledgments: list[tuple[str, str, str]] = []
    for construct in app.node.find_all():
        for entry in construct.node.metadata:
            if entry.type == key:
                for rule, reason in dict(entry.data or {}).items():
                    acknowledgments.append((construct.node.path, rule, reason))
    return Synthesized(name, outdir, templates, acknowledgments)
