"""Request models reject bad input with an error naming the field (through the error mapping)."""

from __future__ import annotations

import json
from typing import Any

import pytest
from pydantic import BaseModel, ValidationError

from engram.api.errors import error_response
from engram.api.models import (
    EventsRequest,
    MemoryOut,
    MemoryPatchRequest,
    MemoryRecallQuery,
    MemorySaveRequest,
    ObservationsRequest,
    PersonaRequest,
    QueryEvent,
    SessionRequest,
    TeamSettingsRequest,
    ToolCallRequest,
    ToolEvent,
    TranscriptRequest,
)


def fields_of(model: type[BaseModel], body: Any) -> list[str]:
    """The ``details[].field`` a client sees for ``body`` (raw JSON text, like the wire)."""
    with pytest.raises(ValidationError) as info:  # as parse_body validates: by alias only
        model.model_validate(json.loads(json.dumps(body)), by_alias=True, by_name=False)
    err = error_response(info.value)
    assert err.status == 422
    assert err.code == "invalid_input"
    return [d["field"] for d in err.details]


def obs(**overrides: Any) -> dict[str, Any]:
    metadata = {"toolName": "get_account", "durationMs": 3}
    return {"type": "tool_success", "content": "ran get_account", "metadata": metadata, **overrides}


def test_valid_observations_parse_with_camel_case() -> None:
    req = ObservationsRequest.model_validate(
        {"observations": [obs(id="o-1", createdAt=5, metadata={"toolName": "x", "durationMs": 1})]}
    )
    assert req.observations[0].created_at == 5
    assert req.observations[0].metadata == {"toolName": "x", "durationMs": 1}


@pytest.mark.parametrize(
    ("body", "field"),
    [
        ({}, "observations"),
        ({"observations": []}, "observations"),
        ({"observations": [obs()] * 101}, "observations"),
        ({"observations": [obs(type="nope")]}, "observations.0.type"),
        ({"observations": [obs(content="")]}, "observations.0.content"),
        ({"observations": [obs(content="x" * 1001)]}, "observations.0.content"),
        ({"observations": [obs(content=5)]}, "observations.0.content"),
        ({"observations": [obs(createdAt="5")]}, "observations.0.createdAt"),
        ({"observations": [obs(createdAt=-1)]}, "observations.0.createdAt"),
        ({"observations": [obs(created_at=5)]}, "observations.0.created_at"),
        ({"observations": [obs(extra=1)]}, "observations.0.extra"),
        ({"observations": [obs(metadata={"k": "v" * 5000})]}, "observations.0.metadata"),
        ({"observations": [obs(metadata=[1])]}, "observations.0.metadata"),
        ({"observations": [obs(content="a\x00b")]}, "observations.0.content"),
        ({"observations": [obs(metadata={"k": "\x00"})]}, "observations.0.metadata"),
        ({"observations": [obs(id="")]}, "observations.0.id"),
        ({"observations": "x"}, "observations"),
        ({"observations": [obs()], "more": True}, "more"),
    ],
)
def test_bad_observations_name_the_field(body: dict[str, Any], field: str) -> None:
    assert field in fields_of(ObservationsRequest, body)


def test_lone_surrogate_is_rejected() -> None:
    raw = json.loads('{"observations":[{"type":"tool_success","content":"\\ud800"}]}')
    with pytest.raises(ValidationError) as info:
        ObservationsRequest.model_validate(raw)
    assert error_response(info.value).details[0]["field"] == "observations.0.content"


def test_unicode_text_is_kept() -> None:
    text = "Zoë 😀 \u202e عربى 漢字"
    req = ObservationsRequest.model_validate({"observations": [obs(content=text)]})
    assert req.observations[0].content == text


def test_events_discriminate_on_kind() -> None:
    req = EventsRequest.model_validate(
        {
            "events": [
                {"kind": "query", "text": "royalty report"},
                {
                    "kind": "tool",
                    "toolName": "get_account",
                    "ok": False,
                    "durationMs": 3,
                    "error": "timeout",
                    "result": {"accountId": "A1"},
                },
            ]
        }
    )
    assert isinstance(req.events[0], QueryEvent)
    assert isinstance(req.events[1], ToolEvent)
    assert req.events[1].tool_name == "get_account"


@pytest.mark.parametrize(
    ("event", "field"),
    [
        ({"kind": "nope"}, "events.0"),
        ({"text": "x"}, "events.0"),
        ({"kind": "query"}, "events.0.query.text"),
        ({"kind": "tool", "toolName": "t", "ok": "yes", "durationMs": 1}, "events.0.tool.ok"),
        (
            {"kind": "tool", "toolName": "t", "ok": True, "durationMs": -1},
            "events.0.tool.durationMs",
        ),
        (
            {"kind": "tool", "toolName": "t", "ok": True, "durationMs": 1.5},
            "events.0.tool.durationMs",
        ),
        ({"kind": "tool", "toolName": "", "ok": True, "durationMs": 1}, "events.0.tool.toolName"),
        ({"kind": "tool", "toolName": "t", "ok": True}, "events.0.tool.durationMs"),
        (
            {"kind": "tool", "toolName": "t", "ok": True, "durationMs": 1, "result": "x" * 70000},
            "events.0.tool.result",
        ),
    ],
)
def test_bad_events_name_the_field(event: dict[str, Any], field: str) -> None:
    assert field in fields_of(EventsRequest, {"events": [event]})


def test_events_array_is_bounded() -> None:
    event = {"kind": "query", "text": "x"}
    assert "events" in fields_of(EventsRequest, {"events": [event] * 101})
    assert len(EventsRequest.model_validate({"events": [event] * 100}).events) == 100


@pytest.mark.parametrize(
    ("body", "field"),
    [
        ({"value": "v"}, "key"),
        ({"key": "k"}, "value"),
        ({"key": "k" * 101, "value": "v"}, "key"),
        ({"key": "k", "value": "v" * 2001}, "value"),
        ({"key": "k", "value": "v", "confidence": 1.01}, "confidence"),
        ({"key": "k", "value": "v", "confidence": -0.1}, "confidence"),
        ({"key": "k", "value": "v", "confidence": "high"}, "confidence"),
        ({"key": "k", "value": "v", "scope": "world"}, "scope"),
        ({"key": "a\nb", "value": "v"}, "key"),
        ({"key": "k", "value": "v", "persona_id": "p"}, "persona_id"),
    ],
)
def test_bad_memory_save_names_the_field(body: dict[str, Any], field: str) -> None:
    assert field in fields_of(MemorySaveRequest, body)


def test_memory_limits_are_inclusive() -> None:
    req = MemorySaveRequest.model_validate(
        {"key": "k" * 100, "value": "v" * 2000, "confidence": 1, "personaId": "p"}
    )
    assert req.confidence == 1.0
    assert req.persona_id == "p"


def test_patch_needs_at_least_one_field() -> None:
    assert fields_of(MemoryPatchRequest, {}) == ["body"]
    assert MemoryPatchRequest.model_validate({"value": "new"}).value == "new"


def test_recall_query_coerces_query_string_values() -> None:
    q = MemoryRecallQuery.model_validate({"maxResults": "5", "personaId": "p"})
    assert (q.max_results, q.persona_id) == (5, "p")
    assert MemoryRecallQuery.model_validate({}).max_results == 20
    assert "maxResults" in fields_of(MemoryRecallQuery, {"maxResults": "0"})
    assert "maxResults" in fields_of(MemoryRecallQuery, {"maxResults": "many"})


def test_tool_call_accepts_arguments_as_object_or_json_string() -> None:
    as_obj = ToolCallRequest.model_validate({"arguments": {"key": "k", "value": "v"}})
    as_str = ToolCallRequest.model_validate({"arguments": '{"key": "k", "value": "v"}'})
    assert as_obj.arguments == as_str.arguments == {"key": "k", "value": "v"}
    assert "arguments" in fields_of(ToolCallRequest, {"arguments": "{not json"})
    assert "arguments" in fields_of(ToolCallRequest, {"arguments": "[1]"})


def test_transcript_bounds() -> None:
    ok = {"messages": [{"role": "user", "content": "hi", "at": 1}]}
    assert TranscriptRequest.model_validate(ok).messages[0].role == "user"
    assert "messages" in fields_of(TranscriptRequest, {"messages": []})
    assert "messages.0.role" in fields_of(
        TranscriptRequest, {"messages": [{"role": "robot", "content": "x"}]}
    )
    many = {"messages": [{"role": "user", "content": "x"}] * 501}
    assert "messages" in fields_of(TranscriptRequest, many)


def test_other_requests() -> None:
    assert "memoryEnabled" in fields_of(TeamSettingsRequest, {"memoryEnabled": "yes"})
    assert "extraction.enabled" in fields_of(PersonaRequest, {"extraction": {"enabled": 1}})
    assert "allowedGroups" in fields_of(PersonaRequest, {"allowedGroups": ["g"] * 101})
    assert "query" in fields_of(SessionRequest, {"query": ""})
    assert SessionRequest.model_validate({}).persona_id is None


def test_responses_serialise_camel_case(memory_out: MemoryOut) -> None:
    dumped = memory_out.model_dump(mode="json")
    assert dumped["ownerId"] == "p"
    assert dumped["sourceChannelId"] == "c"
    assert "owner_id" not in dumped
