"""Server-side emission: raw query/tool events become observations by configurable rules."""

from __future__ import annotations

import json
from pathlib import Path

import pytest
from pydantic import TypeAdapter, ValidationError

from engram import ObservationType
from engram.api.behaviour_inputs import Event, QueryEvent, ToolEvent
from engram.behaviour.commands import QueryAsked, ToolRan
from engram.behaviour.emission import EmissionRules, observations_from_events

ID = "t:u"
NOW = 1_767_225_600_000


def test_query_matches_default_domains() -> None:
    out = observations_from_events(
        ID, [QueryAsked(text="What ROYALTIES did the contract pay?")], now_ms=NOW
    )
    assert {o.metadata["domain"] for o in out} == {"royalty", "contract"}
    assert all(o.type is ObservationType.QUERY_PATTERN and o.created_at == NOW for o in out)
    assert observations_from_events(ID, [QueryAsked(text="hello there")], now_ms=NOW) == []


def test_tool_events_become_success_and_failure_except_meta_tools() -> None:
    events = [
        ToolRan(tool_name="run_report", ok=True, duration_ms=12),
        ToolRan(tool_name="run_report", ok=False, duration_ms=40, error="timeout"),
        ToolRan(tool_name="search_catalog", ok=True, duration_ms=1),
    ]
    out = observations_from_events(ID, events, now_ms=NOW)
    assert [o.type for o in out] == [ObservationType.TOOL_SUCCESS, ObservationType.TOOL_FAILURE]
    assert out[1].metadata == {"toolName": "run_report", "durationMs": 40, "error": "timeout"}


@pytest.mark.parametrize(
    ("tool", "result", "expected"),
    [
        ("get_account", {"id": "A1", "name": "Acme"}, [("account", "A1", "Acme")]),
        ("get_account", {"account": {"accountId": 7}}, [("account", "7", None)]),
        (
            "search_snowflake_schema",
            {"tables": [{"fullName": "DB.S.T1", "name": "T1"}, {"name": "T2"}]},
            [("schema_table", "DB.S.T1", "T1"), ("schema_table", "T2", "T2")],
        ),
        (
            "get_products_by_isrc",
            [{"isrc": "USRC17607839", "title": "Song"}],
            [("product", "USRC17607839", "Song")],
        ),
        ("get_account", "not an object", []),
        ("get_account", {"name": "no id"}, []),
    ],
)
def test_default_entity_rules(
    tool: str, result: object, expected: list[tuple[str, str, str | None]]
) -> None:
    out = observations_from_events(
        ID, [ToolRan(tool_name=tool, ok=True, duration_ms=1, result=result)], now_ms=NOW
    )
    entities = [
        (o.metadata["entityType"], o.metadata["entityId"], o.metadata.get("entityName"))
        for o in out
        if o.type is ObservationType.ENTITY_ACCESS
    ]
    assert entities == expected


def test_an_invalid_entity_is_skipped_and_the_rest_survives() -> None:
    result = {
        "tables": [
            {"fullName": "DB.S.\u202eBAD", "name": "bad"},
            {"fullName": "DB.S.T\x1b[2J", "name": "escape"},
            {"fullName": "DB.S.GOOD", "name": "good"},
        ]
    }
    events = [
        ToolRan(tool_name="search_snowflake_schema", ok=True, duration_ms=3, result=result),
        QueryAsked(text="royalty totals"),
    ]
    out = observations_from_events(ID, events, now_ms=NOW, batch_id="b")
    assert [o.type for o in out] == [
        ObservationType.TOOL_SUCCESS,
        ObservationType.ENTITY_ACCESS,
        ObservationType.QUERY_PATTERN,
    ]
    assert out[1].metadata["entityId"] == "DB.S.GOOD"


def test_failed_tool_results_yield_no_entities() -> None:
    ev = ToolRan(tool_name="get_account", ok=False, duration_ms=1, error="x", result={"id": "A"})
    out = observations_from_events(ID, [ev], now_ms=NOW)
    assert [o.type for o in out] == [ObservationType.TOOL_FAILURE]


def test_rules_load_from_a_json_file(tmp_path: Path) -> None:
    path = tmp_path / "rules.json"
    path.write_text(
        json.dumps(
            {
                "domainPatterns": {"tax": r"\btax(es)?\b"},
                "metaTools": ["run_report"],
                "entityRules": [
                    {
                        "toolName": "get_artist",
                        "entityType": "artist",
                        "select": "artist",
                        "id": "id",
                        "name": "name",
                    }
                ],
            }
        )
    )
    rules = EmissionRules.from_file(path)
    events = [
        QueryAsked(text="taxes and royalties"),
        ToolRan(tool_name="run_report", ok=True, duration_ms=1),
        ToolRan(
            tool_name="get_artist",
            ok=True,
            duration_ms=1,
            result={"artist": {"id": "9", "name": "X"}},
        ),
    ]
    out = observations_from_events(ID, events, now_ms=NOW, rules=rules)
    assert [
        (
            o.type.value,
            o.metadata.get("domain") or o.metadata.get("toolName") or o.metadata.get("entityId"),
        )
        for o in out
    ] == [
        ("query_pattern", "tax"),
        ("tool_success", "get_artist"),
        ("entity_access", "9"),
    ]
    assert EmissionRules.from_file(None) == EmissionRules()


@pytest.mark.parametrize(
    "body",
    [
        {"domainPatterns": {"x": "(unclosed"}},
        {"entityRules": [{"toolName": "t", "entityType": "e", "id": "a[?"}]},
        {"surprise": True},
    ],
)
def test_invalid_rules_are_rejected(body: dict[str, object]) -> None:
    with pytest.raises(ValidationError):
        EmissionRules.model_validate(body)


def test_batch_ids_make_observation_ids_deterministic() -> None:
    events = [QueryAsked(text="royalty"), ToolRan(tool_name="t", ok=True, duration_ms=1)]
    a = observations_from_events(ID, events, now_ms=NOW, batch_id="req-1")
    b = observations_from_events(ID, events, now_ms=NOW + 5, batch_id="req-1")
    c = observations_from_events(ID, events, now_ms=NOW, batch_id="req-2")
    assert [o.id for o in a] == [o.id for o in b]
    assert not {o.id for o in a} & {o.id for o in c}


def test_event_union_discriminates_on_kind() -> None:
    ta: TypeAdapter[list[Event]] = TypeAdapter(list[Event])
    events = ta.validate_python(
        [
            {"kind": "query", "text": "hi"},
            {"kind": "tool", "toolName": "t", "ok": True, "durationMs": 3, "result": {"a": 1}},
        ]
    )
    assert isinstance(events[0], QueryEvent)
    assert isinstance(events[1], ToolEvent)
    with pytest.raises(ValidationError):
        ta.validate_python([{"kind": "nope"}])
    with pytest.raises(ValidationError):
        ta.validate_python([{"kind": "tool", "toolName": "", "ok": True, "durationMs": 1}])
