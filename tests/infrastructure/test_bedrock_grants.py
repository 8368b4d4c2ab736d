"""Bedrock grants in the templates: an inference profile id is granted on the profile and, only
through that profile, on the foundation model in every region it routes to; a model id on the
model in the stage's region. Exactly what ``engram.bedrock_ids.invoke_grants`` names."""

from __future__ import annotations

import json
from typing import Any

import pytest
from infra.config import STAGES, StageConfig
from infra.constructs.functions import BEDROCK_USERS
from tests.infrastructure.synth import Synthesized
from tests.infrastructure.synth import ref as _ref

from engram.bedrock_ids import invoke_grants, parse_model_id

pytestmark = pytest.mark.infrastructure

PSEUDO = {"AWS::Partition": "${Partition}", "AWS::Region": "${Region}", "AWS::AccountId": "${Acct}"}

# A stage in Europe: Claude through the eu. profile, embeddings by a model id.
EUROPE = StageConfig(
    name="europe",
    bedrock_extraction_model_id="eu.anthropic.claude-3-5-haiku-20241022-v1:0",
    bedrock_embedding_model_id="amazon.titan-embed-text-v2:0",
)


@pytest.fixture(scope="module")
def europe(synth_cache: Any) -> Synthesized:
    result: Synthesized = synth_cache(EUROPE)
    return result


def _text(value: Any) -> str:
    """A template string with its pseudo-parameter Refs written as ``${…}``."""
    if isinstance(value, str):
        return value
    if "Ref" in value:
        return PSEUDO[value["Ref"]]
    separator, parts = value["Fn::Join"]
    return str(separator).join(_text(p) for p in parts)


def _grants_of(synth: Synthesized, role: str) -> set[tuple[str, str]]:
    """(resource, condition as JSON) of every bedrock:InvokeModel statement of ``role``."""
    found: set[tuple[str, str]] = set()
    for policy in synth.resources("AWS::IAM::Policy").values():
        if role not in {_ref(r) for r in policy["Properties"]["Roles"] if isinstance(r, dict)}:
            continue
        for statement in policy["Properties"]["PolicyDocument"]["Statement"]:
            actions = statement["Action"]
            if "bedrock:InvokeModel" not in (actions if isinstance(actions, list) else [actions]):
                continue
            assert statement["Effect"] == "Allow"
            condition = {
                op: {key: _text(v) for key, v in pairs.items()}
                for op, pairs in statement.get("Condition", {}).items()
            }
            resources = statement["Resource"]
            for resource in resources if isinstance(resources, list) else [resources]:
                found.add((_text(resource), json.dumps(condition, sort_keys=True)))
    return found


def _expected(config: StageConfig) -> set[tuple[str, str]]:
    models = []
    if config.embedder == "bedrock":
        models.append(config.bedrock_embedding_model_id)
    if config.extractor == "bedrock":
        models.append(config.bedrock_extraction_model_id)
    return {
        (resource, json.dumps(grant.condition or {}, sort_keys=True))
        for model in models
        for grant in invoke_grants(
            model, partition="${Partition}", region="${Region}", account="${Acct}"
        )
        for resource in grant.resources
    }


def _roles(synth: Synthesized) -> dict[str, str]:
    """Function name -> role logical id, for Engram's functions."""
    roles = {}
    for fn in synth.resources("AWS::Lambda::Function", "Service").values():
        handler = str(fn["Properties"].get("Handler", ""))
        if handler.startswith("functions."):
            roles[handler.split(".")[1]] = _ref(fn["Properties"]["Role"])
    return roles


def _check(synth: Synthesized, config: StageConfig) -> None:
    expected = _expected(config)
    for name, role in _roles(synth).items():
        assert _grants_of(synth, role) == (expected if name in BEDROCK_USERS else set()), name


def test_prod_invokes_claude_through_the_us_profile_and_its_models(prod: Synthesized) -> None:
    config = STAGES["prod"]
    assert parse_model_id(config.bedrock_extraction_model_id).geography == "us"
    _check(prod, config)
    session = _grants_of(prod, _roles(prod)["session"])
    profile = (
        "arn:${Partition}:bedrock:${Region}:${Acct}:inference-profile/"
        "us.anthropic.claude-3-5-haiku-20241022-v1:0"
    )
    routed = "arn:${Partition}:bedrock:*::foundation-model/anthropic.claude-3-5-haiku-20241022-v1:0"
    through = json.dumps({"StringEquals": {"bedrock:InferenceProfileArn": profile}})
    assert (profile, "{}") in session
    assert (routed, through) in session  # the model, in any region, through the profile only
    assert (routed, "{}") not in session
    embedding = "arn:${Partition}:bedrock:${Region}::foundation-model/amazon.titan-embed-text-v2:0"
    assert (embedding, "{}") in session


def test_a_stage_names_its_geographys_profile(europe: Synthesized) -> None:
    _check(europe, EUROPE)
    resources = {resource for resource, _ in _grants_of(europe, _roles(europe)["maintenance"])}
    profile = "inference-profile/eu.anthropic.claude-3-5-haiku-20241022-v1:0"
    assert any(r.endswith(profile) for r in resources)
    assert not any("us.anthropic" in r for r in resources)


def test_a_stage_refuses_an_id_that_is_neither_a_model_nor_a_profile() -> None:
    with pytest.raises(ValueError, match="bedrock_extraction_model_id"):
        StageConfig(name="bad", bedrock_extraction_model_id="claude haiku")
