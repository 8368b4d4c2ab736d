"""Engram's tools in each provider's format, checked by that provider's own SDK types, and a
tool call in each provider's wire shape executed through ``POST /v1/tools/{name}?format=``
(the memories function's handler over in-memory stores)."""

from __future__ import annotations

import json
from collections.abc import Iterator
from typing import Any
from urllib.parse import urlencode

import pytest
from functions.memories import handler as memories_fn
from tests.support import provider_sdks as sdk
from tests.support.unreachable import CLAIMS, UNREACHABLE

from engram.adapters.inmemory_memories import InMemoryMemoryStore
from engram.api.tool_calls import CALL_MODELS as ENGRAM_CALL_MODELS
from engram.api.tools import TOOL_FORMATS, tool_definitions
from engram.bootstrap import Container, set_container
from engram.clock import FakeClock
from engram.local.gateway import build_event
from engram.local.lambda_context import FakeLambdaContext
from engram.memories.service import MemoryService

PROVIDERS = ("openai_chat", "openai_responses", "anthropic", "bedrock", "mcp")


@pytest.fixture(autouse=True)
def _container(monkeypatch: pytest.MonkeyPatch) -> Iterator[None]:
    monkeypatch.setenv("POWERTOOLS_TRACE_DISABLED", "true")
    monkeypatch.setenv("POWERTOOLS_METRICS_DISABLED", "true")
    clock = FakeClock()
    store = InMemoryMemoryStore(clock)
    memories = MemoryService(store, settings=UNREACHABLE, clock=clock)
    old = set_container(Container(UNREACHABLE, clock=clock, memories=memories))
    yield
    set_container(old)


def http(
    method: str, path: str, route_key: str, query: dict[str, str], body: Any = None, **params: str
) -> tuple[int, Any]:
    raw = json.dumps(body).encode() if body is not None else b""
    headers = [("content-type", "application/json")] if body is not None else []
    ev = build_event(
        method=method,
        raw_path=path,
        raw_query=urlencode(query),
        headers=headers,
        body=raw,
        route_key=route_key,
        path_parameters=params,
        source_ip="127.0.0.1",
        claims=CLAIMS,
    )
    out = memories_fn.handler(ev, FakeLambdaContext())
    text = out.get("body")
    return int(out["statusCode"]), json.loads(text) if text else None


def list_tools(fmt: str) -> tuple[int, Any]:
    return http("GET", "/v1/tools", "GET /v1/tools", {"format": fmt})


def call_tool(name: str, fmt: str, body: Any, **query: str) -> tuple[int, Any]:
    return http(
        "POST",
        f"/v1/tools/{name}",
        "POST /v1/tools/{name}",
        {"format": fmt, **query},
        body,
        name=name,
    )


# --- the provider's model asks for a tool: its wire JSON ------------------------------------
def wire(fmt: str, name: str, arguments: dict[str, Any] | str, call_id: str) -> dict[str, Any]:
    """A tool call exactly as the provider's API returns it."""
    as_text = arguments if isinstance(arguments, str) else json.dumps(arguments)
    as_object = arguments if isinstance(arguments, dict) else {}
    if fmt == "openai_chat":
        return {
            "id": call_id,
            "type": "function",
            "function": {"name": name, "arguments": as_text},
        }
    if fmt == "openai_responses":
        return {
            "type": "function_call",
            "id": f"fc_{call_id}",
            "call_id": call_id,
            "name": name,
            "arguments": as_text,
            "status": "completed",
        }
    if fmt == "anthropic":
        return {"type": "tool_use", "id": call_id, "name": name, "input": as_object}
    if fmt == "mcp":  # tools/call params; the JSON-RPC id travels outside them
        return {"name": name, "arguments": as_object}
    return {"toolUse": {"toolUseId": call_id, "name": name, "input": as_object}}


def result_text(fmt: str, result: dict[str, Any]) -> str:
    if fmt == "openai_chat":
        return str(result["content"])
    if fmt == "openai_responses":
        return str(result["output"])
    if fmt == "anthropic":
        return str(result["content"])
    if fmt == "mcp":
        return str(result["content"][0]["text"])
    return str(result["toolResult"]["content"][0]["text"])


def result_failed(fmt: str, result: dict[str, Any]) -> bool | None:
    """The provider's error flag (``None``: OpenAI's results have none)."""
    if fmt == "anthropic":
        return bool(result["is_error"])
    if fmt == "bedrock":
        return bool(result["toolResult"]["status"] == "error")
    if fmt == "mcp":
        return bool(result["isError"])
    return None


def result_call_id(fmt: str, result: dict[str, Any]) -> str | None:
    if fmt == "mcp":
        return None
    key = {"openai_chat": "tool_call_id", "openai_responses": "call_id"}.get(fmt, "tool_use_id")
    return str(result["toolResult"]["toolUseId"] if fmt == "bedrock" else result[key])


# --- definitions ----------------------------------------------------------------------------
@pytest.mark.parametrize("fmt", PROVIDERS)
def test_definitions_are_what_the_providers_sdk_takes(fmt: str) -> None:
    status, body = list_tools(fmt)
    assert status == 200
    assert body["format"] == fmt
    assert body["tools"] == tool_definitions(fmt)  # type: ignore[arg-type]
    assert len(body["tools"]) == 2
    for definition in body["tools"]:
        assert sdk.definition_problems(fmt, definition) == []


def _break(fmt: str, definition: dict[str, Any]) -> list[dict[str, Any]]:
    """Definitions a provider refuses: its required name left out, and a misspelt key."""
    nameless = json.loads(json.dumps(definition))
    holder = {"openai_chat": nameless.get("function"), "bedrock": nameless.get("toolSpec")}
    (holder.get(fmt) or nameless).pop("name")
    misspelt = json.loads(json.dumps(definition))
    inner = {"openai_chat": misspelt.get("function"), "bedrock": misspelt.get("toolSpec")}
    target = inner.get(fmt) or misspelt
    target["descripton"] = target.pop("description")
    return [nameless, misspelt]


@pytest.mark.parametrize("fmt", PROVIDERS)
def test_the_same_check_refuses_a_malformed_definition(fmt: str) -> None:
    good = tool_definitions(fmt)[0]  # type: ignore[arg-type]
    for bad in _break(fmt, good):
        assert sdk.definition_problems(fmt, bad) != [], bad
    crossed = tool_definitions("anthropic" if fmt != "anthropic" else "openai_chat")[0]
    assert sdk.definition_problems(fmt, crossed) != []  # another provider's shape


def test_openai_chat_nests_function_and_responses_does_not() -> None:
    chat, responses = tool_definitions("openai_chat")[0], tool_definitions("openai_responses")[0]
    assert set(chat) == {"type", "function"}
    assert chat["function"]["name"] == "memory_save"
    assert {"type", "name", "parameters", "strict"} <= set(responses)
    assert "function" not in responses


def test_every_format_is_listed_and_a_bad_one_is_422() -> None:
    for fmt in TOOL_FORMATS:
        status, body = list_tools(fmt)
        assert status == 200, fmt
        assert [
            t.get("name") or t.get("function", t.get("toolSpec", {})).get("name")
            for t in body["tools"]
        ] == ["memory_save", "memory_recall"]
    status, body = list_tools("openai")
    assert status == 422
    assert body["error"]["details"][0]["field"] == "format"
    status, body = call_tool("memory_save", "gemini", {})
    assert status == 422
    assert body["error"]["details"][0]["field"] == "format"


def test_json_schema_keeps_its_shape() -> None:
    status, body = list_tools("json_schema")
    assert status == 200
    assert set(body["tools"][0]) == {"name", "description", "inputSchema"}
    assert http("GET", "/v1/tools", "GET /v1/tools", {})[1] == body


# --- calls ----------------------------------------------------------------------------------
@pytest.mark.parametrize("fmt", ["openai_chat", "openai_responses", "anthropic", "mcp"])
def test_call_models_take_exactly_the_providers_fields(fmt: str) -> None:
    ours = {f.alias or n for n, f in ENGRAM_CALL_MODELS[fmt].model_fields.items()}  # type: ignore[index]
    theirs = {f.alias or n for n, f in sdk.CALL_MODELS[fmt].model_fields.items()}
    assert ours == theirs


def test_bedrock_call_model_takes_exactly_converse_tool_use() -> None:
    block = sdk.converse_shape().members["messages"].member.members["content"].member
    tool_use = block.members["toolUse"]
    ours = ENGRAM_CALL_MODELS["bedrock"].model_fields["tool_use"].annotation
    assert {f.alias for f in ours.model_fields.values()} == set(tool_use.members)  # type: ignore[union-attr]


@pytest.mark.parametrize("fmt", PROVIDERS)
def test_round_trip_save_then_recall(fmt: str) -> None:
    save = sdk.wire_call(fmt, wire(fmt, "memory_save", {"key": "editor", "value": "helix"}, "c1"))
    status, result = call_tool("memory_save", fmt, save, sourceChannelId="conv-1")
    assert status == 200
    assert sdk.result_problems(fmt, result, save) == []
    assert result_call_id(fmt, result) == (None if fmt == "mcp" else "c1")
    assert result_failed(fmt, result) in (False, None)
    assert result_text(fmt, result) == 'Saved memory "editor" (user).'

    recall = sdk.wire_call(fmt, wire(fmt, "memory_recall", {"query": "editor"}, "c2"))
    status, result = call_tool("memory_recall", fmt, recall)
    assert status == 200
    assert sdk.result_problems(fmt, result, recall) == []
    assert result_call_id(fmt, result) == (None if fmt == "mcp" else "c2")
    assert '- editor: "helix"' in result_text(fmt, result)


@pytest.mark.parametrize("fmt", PROVIDERS)
def test_invalid_arguments_come_back_as_an_error_result(fmt: str) -> None:
    call = sdk.wire_call(fmt, wire(fmt, "memory_save", {"key": "editor"}, "c3"))
    status, result = call_tool("memory_save", fmt, call)
    assert status == 200
    assert sdk.result_problems(fmt, result, call) == []
    assert result_failed(fmt, result) in (True, None)
    assert result_text(fmt, result).startswith("Invalid arguments, nothing was done: value")
    recall = call_tool("memory_recall", fmt, wire(fmt, "memory_recall", {}, "c4"))[1]
    assert result_text(fmt, recall) == "No memories found."  # nothing was saved


@pytest.mark.parametrize("fmt", ["openai_chat", "openai_responses"])
def test_arguments_that_are_not_json_are_an_error_result(fmt: str) -> None:
    for arguments, said in (('{"key": "a", ', "is not valid JSON"), ("[1]", "a JSON object")):
        status, result = call_tool("memory_save", fmt, wire(fmt, "memory_save", arguments, "c5"))
        assert status == 200
        assert said in result_text(fmt, result)


@pytest.mark.parametrize("fmt", PROVIDERS)
def test_the_path_names_the_tool_and_a_mismatch_is_422(fmt: str) -> None:
    call = wire(fmt, "memory_recall", {"key": "k", "value": "v"}, "c6")
    status, body = call_tool("memory_save", fmt, call)
    assert status == 422
    field = {"openai_chat": "function.name", "bedrock": "toolUse.name"}.get(fmt, "name")
    assert body["error"]["details"][0]["field"] == field
    assert call_tool("memory_forget", fmt, wire(fmt, "memory_forget", {}, "c7"))[0] == 404


@pytest.mark.parametrize("fmt", PROVIDERS)
def test_a_body_in_another_shape_is_422_naming_the_field(fmt: str) -> None:
    other = "anthropic" if fmt != "anthropic" else "bedrock"
    status, body = call_tool("memory_save", fmt, wire(other, "memory_save", {}, "c8"))
    assert status == 422
    assert body["error"]["code"] == "invalid_input"


def test_mcp_call_and_result() -> None:
    status, body = list_tools("mcp")
    assert status == 200
    assert body["tools"][1]["annotations"]["readOnlyHint"] is True
    call = {"name": "memory_save", "arguments": {"key": "editor", "value": "helix"}}
    status, result = call_tool("memory_save", "mcp", call)
    assert status == 200
    assert result == {
        "content": [{"type": "text", "text": 'Saved memory "editor" (user).'}],
        "isError": False,
    }
    bad = call_tool("memory_save", "mcp", {"name": "memory_save", "arguments": {}})[1]
    assert bad["isError"] is True


def test_json_schema_ids_in_body_and_query_must_agree() -> None:
    body = {"arguments": {"key": "k", "value": "v"}, "personaId": "p1"}
    status, err = call_tool("memory_save", "json_schema", body, personaId="p2")
    assert status == 422
    assert err["error"]["details"][0]["field"] == "personaId"


@pytest.mark.parametrize("fmt", PROVIDERS)
def test_the_same_check_refuses_a_malformed_result(fmt: str) -> None:
    call = sdk.wire_call(fmt, wire(fmt, "memory_recall", {}, "c9"))
    result = call_tool("memory_recall", fmt, call)[1]
    assert sdk.result_problems(fmt, result, call) == []
    broken = json.loads(json.dumps(result))
    if fmt == "bedrock":
        broken["toolResult"]["status"] = "failed"
    elif fmt == "anthropic":
        broken["is_error"] = "no"
    elif fmt == "mcp":
        broken["isError"] = "no"
    else:
        broken["tool_call_id" if fmt == "openai_chat" else "output"] = 7
    assert sdk.result_problems(fmt, broken, call) != []
    renamed = {("tool_use_id" if k == "tool_call_id" else k): v for k, v in result.items()}
    if fmt == "openai_chat":
        assert sdk.result_problems(fmt, renamed, call) != []
