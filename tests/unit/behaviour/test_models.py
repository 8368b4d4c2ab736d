"""Observation validation: bad input names the field and nothing is stored."""

from __future__ import annotations

from typing import Any

import pytest
from pydantic import ValidationError
from tests.support.facts import make_fact

from engram import InMemoryBehaviourStore, Observation, ObservationType
from engram.behaviour.models import observation_to_fact_key, parse_observations
from engram.errors import InvalidInput

ID = "t:u"


def payload(**over: Any) -> dict[str, Any]:
    base: dict[str, Any] = {
        "type": "tool_success",
        "content": "ok",
        "metadata": {"toolName": "get_account", "durationMs": 12},
        "createdAt": 1_767_225_600_000,
    }
    base.update(over)
    return base


def field_of(items: list[dict[str, Any]]) -> str:
    with pytest.raises(InvalidInput) as err:
        parse_observations(items, identity_id=ID)
    return err.value.field


def test_camel_case_json_round_trip() -> None:
    [obs] = parse_observations([payload()], identity_id=ID)
    data = obs.model_dump(by_alias=True)
    assert {"identityId", "createdAt", "metadata", "type", "id"} <= set(data)
    assert Observation.model_validate_json(obs.model_dump_json(by_alias=True)) == obs
    assert obs.identity_id == ID
    assert obs.type is ObservationType.TOOL_SUCCESS
    assert len(obs.id) == 32


def test_identity_comes_from_the_caller_not_the_payload() -> None:
    [obs] = parse_observations([payload(identityId="someone:else")], identity_id=ID)
    assert obs.identity_id == ID


@pytest.mark.parametrize(
    ("item", "field"),
    [
        (payload(type="tool_party"), "observations.1.type"),
        (payload(metadata={"durationMs": 1}), "observations.1.metadata.toolName"),
        (payload(metadata={"toolName": "x"}), "observations.1.metadata.durationMs"),
        (payload(metadata={"toolName": 3, "durationMs": 1}), "observations.1.metadata.toolName"),
        (
            payload(metadata={"toolName": "x", "durationMs": "1"}),
            "observations.1.metadata.durationMs",
        ),
        (
            payload(metadata={"toolName": "x", "durationMs": True}),
            "observations.1.metadata.durationMs",
        ),
        (payload(metadata={"toolName": " ", "durationMs": 1}), "observations.1.metadata.toolName"),
        (payload(type="tool_failure"), "observations.1.metadata.error"),
        (
            payload(metadata={"toolName": "a\x1fb", "durationMs": 1}),
            "observations.1.metadata.toolName",
        ),
        (
            payload(type="query_pattern", metadata={"domain": "a\nb", "query": "q"}),
            "observations.1.metadata.domain",
        ),
        (
            payload(type="entity_access", metadata={"entityType": "a"}),
            "observations.1.metadata.entityId",
        ),
        (
            payload(
                type="entity_access", metadata={"entityType": "a", "entityId": "1", "entityName": 5}
            ),
            "observations.1.metadata.entityName",
        ),
        (payload(type="query_pattern", metadata={"domain": "x"}), "observations.1.metadata.query"),
        (payload(content="x" * 1001), "observations.1.content"),
        (
            payload(metadata={"toolName": "x", "durationMs": 1, "blob": "y" * 5000}),
            "observations.1.metadata",
        ),
        (
            payload(metadata={"toolName": "x", "durationMs": float("nan")}),
            "observations.1.metadata",
        ),
        (
            payload(metadata={"toolName": "x", "durationMs": 1, "s": {1, 2}}),
            "observations.1.metadata",
        ),
        (
            payload(metadata={"toolName": "x", "durationMs": 1, "b": b"raw"}),
            "observations.1.metadata",
        ),
        (payload(createdAt=-1), "observations.1.createdAt"),
        (payload(createdAt="yesterday"), "observations.1.createdAt"),
        (payload(surprise=1), "observations.1.surprise"),
    ],
)
def test_bad_input_names_the_field_and_nothing_is_appended(
    item: dict[str, Any], field: str
) -> None:
    store = InMemoryBehaviourStore()
    items = [payload(), item, payload()]
    assert field_of(items) == field
    # the batch is validated before anything is stored: a caller that parses first appends nothing
    assert store.since(ID, None) == []


def test_content_of_exactly_1000_chars_and_4_kib_metadata_are_accepted() -> None:
    blob = "y" * (4096 - len('{"toolName":"x","durationMs":1,"b":""}'))
    md = {"toolName": "x", "durationMs": 1, "b": blob}
    [obs] = parse_observations([payload(content="x" * 1000, metadata=md)], identity_id=ID)
    assert len(obs.content) == 1000


def test_unicode_heavy_input_is_measured_in_bytes() -> None:
    md = {"toolName": "x", "durationMs": 1, "b": "é" * 2100}  # 4200 bytes of UTF-8
    assert field_of([payload(metadata=md)]) == "observations.0.metadata"


def test_model_validation_raises_a_pydantic_error_naming_metadata() -> None:
    with pytest.raises(ValidationError) as err:
        Observation(identity_id=ID, type="tool_success", metadata={}, created_at=1)
    assert err.value.errors()[0]["loc"] == ("metadata",)
    assert "metadata.toolName" in str(err.value)


def test_fact_keys_per_type(make_obs: Any) -> None:
    assert observation_to_fact_key(make_obs("tool_success", "a"))[1] == "tool_affinity:a"
    assert observation_to_fact_key(make_obs("tool_failure", "a"))[1] == "tool_avoidance:a"
    key = observation_to_fact_key(make_obs("entity_access", ("account", "42", "Acme")))
    assert key[1] == "entity_frequency:account:42"
    assert observation_to_fact_key(make_obs("query_pattern", "royalty"))[1] == (
        "domain_preference:royalty"
    )


def test_fact_evolve_is_a_trusted_copy_equal_to_model_copy() -> None:
    fact = make_fact("tool_affinity:x", content='Tool "x" works well for this user', at=1)
    changes: dict[str, Any] = {"confidence": 0.6, "reinforcement_count": 2, "round_cursor": 9}
    evolved = fact.evolve(**changes)
    assert evolved == fact.model_copy(update=changes)
    assert evolved.to_storage_json() == fact.model_copy(update=changes).to_storage_json()
    assert fact.confidence == 0.5  # the original is untouched
    assert fact.round_cursor is None
    with pytest.raises(AttributeError, match="confidance"):
        fact.evolve(confidance=0.7)
