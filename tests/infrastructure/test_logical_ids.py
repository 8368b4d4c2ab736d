"""Deployed resources keep their logical ids: CloudFormation replaces a resource whose logical id
changes (a new database, a new user pool), so regrouping the CDK code must not rename one.

``logical_ids.json`` lists every stage's resources (logical id -> type) as deployed; a resource
may be added, but one listed must still exist with the same type. Lambda versions are left out:
their ids carry a hash of the function and change with its code by design. When a resource is
removed or replaced on purpose, update the file in the same commit and say why.
"""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import pytest

pytestmark = pytest.mark.infrastructure

DEPLOYED: dict[str, dict[str, str]] = json.loads(
    (Path(__file__).parent / "logical_ids.json").read_text()
)
UNLISTED_TYPES = frozenset({"AWS::Lambda::Version"})


def current(template: dict[str, Any]) -> dict[str, str]:
    return {
        logical_id: resource["Type"]
        for logical_id, resource in template["Resources"].items()
        if resource["Type"] not in UNLISTED_TYPES
    }


@pytest.mark.parametrize("stage", ["dev", "staging", "prod"])
def test_every_deployed_resource_keeps_its_logical_id_and_type(
    stage: str, synth_cache: Any
) -> None:
    synthesized = synth_cache(stage)
    stacks = [name for name in DEPLOYED if name.startswith(f"Engram-{stage}-")]
    assert stacks, f"logical_ids.json lists no stack of {stage}"
    for stack in stacks:
        now = current(synthesized.templates[stack])
        gone = {lid: t for lid, t in DEPLOYED[stack].items() if lid not in now}
        retyped = {
            lid: (t, now[lid]) for lid, t in DEPLOYED[stack].items() if lid in now and now[lid] != t
        }
        assert not gone, f"{stack}: these resources would be replaced or deleted: {gone}"
        assert not retyped, f"{stack}: these resources changed type: {retyped}"
