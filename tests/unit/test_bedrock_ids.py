"""Bedrock model and inference profile ids: what is accepted, and the IAM grants they need."""

from __future__ import annotations

import pytest
from pydantic import ValidationError

from engram.bedrock_ids import Grant, invoke_grants, parse_model_id
from engram.settings import Settings

HAIKU = "anthropic.claude-3-5-haiku-20241022-v1:0"


@pytest.mark.parametrize(
    ("value", "geography", "model"),
    [
        (HAIKU, None, HAIKU),
        (f"us.{HAIKU}", "us", HAIKU),
        (f"eu.{HAIKU}", "eu", HAIKU),
        (f"apac.{HAIKU}", "apac", HAIKU),
        (f"us-gov.{HAIKU}", "us-gov", HAIKU),
        (
            "global.anthropic.claude-sonnet-4-20250514-v1:0",
            "global",
            "anthropic.claude-sonnet-4-20250514-v1:0",
        ),
        ("amazon.titan-embed-text-v2:0", None, "amazon.titan-embed-text-v2:0"),
    ],
)
def test_model_and_profile_ids_parse(value: str, geography: str | None, model: str) -> None:
    parsed = parse_model_id(value)
    assert (parsed.geography, parsed.foundation_model, parsed.is_profile) == (
        geography,
        model,
        geography is not None,
    )


@pytest.mark.parametrize("value", ["", "claude", "us.claude", "us.", "arn:aws:x", "a b.c"])
def test_other_values_are_refused_by_the_settings_naming_the_field(value: str) -> None:
    with pytest.raises(ValueError, match="not a Bedrock model id"):
        parse_model_id(value)
    with pytest.raises(ValidationError, match="bedrock_extraction_model_id"):
        Settings(bedrock_extraction_model_id=value)


def test_a_foundation_model_is_granted_in_the_stage_region_only() -> None:
    grants = invoke_grants(HAIKU, partition="aws", region="us-west-2", account="1")
    assert grants == [Grant(("arn:aws:bedrock:us-west-2::foundation-model/" + HAIKU,))]


def test_a_profile_is_granted_with_its_model_wherever_it_routes_but_only_through_it() -> None:
    profile, routed = invoke_grants(f"eu.{HAIKU}", partition="aws", region="eu-west-1", account="1")
    arn = f"arn:aws:bedrock:eu-west-1:1:inference-profile/eu.{HAIKU}"
    assert profile == Grant((arn,))
    assert routed.resources == (f"arn:aws:bedrock:*::foundation-model/{HAIKU}",)
    assert routed.condition == {"StringEquals": {"bedrock:InferenceProfileArn": arn}}


def test_the_default_extraction_model_is_a_profile() -> None:
    assert parse_model_id(Settings().bedrock_extraction_model_id).is_profile
