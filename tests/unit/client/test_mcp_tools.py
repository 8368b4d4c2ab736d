"""The MCP server's tools, driven in-process by the ``mcp`` SDK's own client over a client of
a scripted Engram: their schemas, what each sends, and failures as ``isError`` results."""

from __future__ import annotations

import asyncio
import contextlib
import json
from collections.abc import AsyncIterator, Awaitable, Callable
from typing import Any

import httpx
from mcp import Client
from mcp.server.mcpserver import Context
from tests.support.mcp_tools import MCP_TOOLS
from tests.unit.client.bodies import Script, respond

from engram_client import AsyncEngramClient, RetryPolicy
from engram_client.mcp import build_server


def run(script: Script, body: Callable[[Client], Awaitable[Any]]) -> Any:
    @contextlib.asynccontextmanager
    async def clients(ctx: Context) -> AsyncIterator[AsyncEngramClient]:
        async with AsyncEngramClient(
            "http://engram.test",
            "tok",
            transport=httpx.MockTransport(script),
            retry=RetryPolicy(max_retries=1, backoff_s=0.001),
        ) as engram:
            yield engram

    async def main() -> Any:
        async with Client(build_server(clients)) as client:
            return await body(client)

    return asyncio.run(main())


def test_the_tools_have_descriptions_and_schemas_and_take_no_identity() -> None:
    listed = run(Script(respond), lambda c: c.list_tools())
    assert {t.name for t in listed.tools} == MCP_TOOLS
    for tool in listed.tools:
        assert tool.description is not None, tool.name
        assert len(tool.description) > 40, tool.name
        schema = tool.input_schema
        assert schema["type"] == "object"
        for name, prop in schema["properties"].items():
            assert prop.get("description"), (tool.name, name)
            assert not any(word in name for word in ("user", "identity", "team", "token"))
    save = next(t for t in listed.tools if t.name == "memory_save").input_schema
    assert set(save["required"]) == {"key", "value"}


def test_each_tool_calls_its_route_and_answers_structured_json() -> None:
    script = Script(respond)

    async def calls(c: Client) -> dict[str, Any]:
        out = {}
        for name, args in [
            ("memory_save", {"key": "k", "value": "v", "persona_id": "p1"}),
            ("memory_recall", {"query": "k", "max_results": 3}),
            ("memory_forget", {"memory_id": "m1"}),
            ("session_context", {"query": "hello"}),
            ("record_tool_outcome", {"tool_name": "search", "ok": False, "duration_ms": 9}),
            ("rank_tools", {"tool_names": ["search", "other", "get_account"]}),
        ]:
            result = await c.call_tool(name, args)
            assert not result.is_error, (name, result.content)
            assert json.loads(result.content[0].text) == result.structured_content
            out[name] = result.structured_content
        return out

    out = run(script, calls)
    sent = [(r.method, r.url.path, r.url.query.decode()) for r in script.requests]
    assert sent[:3] == [
        ("POST", "/v1/memories", ""),
        ("GET", "/v1/memories", "query=k&maxResults=3"),
        ("DELETE", "/v1/memories/m1", ""),
    ]
    assert json.loads(script.requests[0].content)["personaId"] == "p1"
    assert json.loads(script.requests[4].content) == {
        "events": [{"kind": "tool", "toolName": "search", "ok": False, "durationMs": 9}]
    }
    assert out["memory_save"]["key"] == "k"
    assert [m["id"] for m in out["memory_recall"]["memories"]] == ["m1"]
    assert out["memory_forget"] == {"forgotten": "m1"}
    assert out["session_context"]["prompt"].startswith("## What")
    assert out["session_context"]["toolAffinities"] == {"get_account": 0.8, "search": 0.3}
    assert out["record_tool_outcome"] == {"accepted": 1}
    assert [t["name"] for t in out["rank_tools"]["tools"]] == ["get_account", "search", "other"]
    assert json.loads(script.requests[5].content) == {
        "candidates": [
            {"name": "search", "score": 0.0},
            {"name": "other", "score": 0.0},
            {"name": "get_account", "score": 0.0},
        ]
    }
    assert (script.requests[5].method, script.requests[5].url.path) == ("POST", "/v1/tools/rank")


def test_failures_come_back_as_tool_errors_the_model_can_read() -> None:
    def refuse(request: httpx.Request) -> httpx.Response:
        if request.url.path == "/v1/memories/gone":
            return httpx.Response(404, json={"error": {"code": "not_found", "message": "no"}})
        error = {"code": "validation_failed", "message": "bad input"}
        error["details"] = [{"field": "key", "message": "too long"}]  # type: ignore[assignment]
        return httpx.Response(422, json={"error": error})

    def down(request: httpx.Request) -> httpx.Response:
        raise httpx.ConnectError("refused", request=request)

    async def refused(c: Client) -> list[Any]:
        return [
            await c.call_tool("memory_save", {"key": "k" * 500, "value": "v"}),
            await c.call_tool("memory_forget", {"memory_id": "gone"}),
            await c.call_tool("memory_recall", {"max_results": 500}),  # outside the schema
        ]

    saved, forgotten, outside = run(Script(refuse), refused)
    assert saved.is_error
    assert "validation_failed: bad input (field: key)" in saved.content[0].text
    assert forgotten.is_error
    assert "not_found" in forgotten.content[0].text
    assert outside.is_error
    assert "max_results" in outside.content[0].text

    lost = run(Script(down), lambda c: c.call_tool("session_context", {}))
    assert lost.is_error
    assert "could not be reached" in lost.content[0].text
