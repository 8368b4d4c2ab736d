"""Synthesis helpers shared by the infrastructure tests."""

from __future__ import annotations

import json
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from aws_cdk import Validations
from infra.app import create_app


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


def synthesize(stage: str, repo_root: Path, outdir: Path) -> Synthesized:
    app, built = create_app(stage, repo_root=repo_root, outdir=str(outdir))
    app.synth()  # raises if any cdk-nag AwsSolutions finding is not acknowledged
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
    return Synthesized(stage, outdir, templates, acknowledgments)
