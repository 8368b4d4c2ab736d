"""Streamable HTTP: ``POST /mcp`` of ``engram serve`` runs the very Lambda handler AWS runs
(``functions.mcp.handler``), behind the local JWT authorizer. Driven by the ``mcp`` SDK's own
client: several MCP sessions of two users in the one server process, stateless JSON answers,
tools acting for the token's user only, failures as ``isError``, and no way in without a token.
"""

from __future__ import annotations

import asyncio
import json
from collections.abc import AsyncIterator
from contextlib import asynccontextmanager
from typing import Any

import httpx2
from mcp import ClientSession
from mcp.client.streamable_http import streamable_http_client
from tests.e2e.harness import LocalEngram, Tenant

from engram.api.mcp_routes import MCP_PATH


@asynccontextmanager
async def mcp_session(service: LocalEngram, token: str) -> AsyncIterator[ClientSession]:
    http = httpx2.AsyncClient(headers={"Authorization": f"Bearer {token}"}, timeout=60)
    async with (
        http,
        streamable_http_client(f"{service.url}{MCP_PATH}", http_client=http) as (read, write),
        ClientSession(read, write) as session,
    ):
        await session.initialize()
        yield session


def structured(result: Any) -> Any:
    assert not result.is_error, result.content
    assert json.loads(result.content[0].text) == result.structured_content
    return result.structured_content


def test_two_users_in_several_sessions_of_one_server(service: LocalEngram, tenant: Tenant) -> None:
    alice = service.token(tenant.user, tenant.team)
    bob = service.token(tenant.other_user, tenant.team)

    async def run() -> None:
        async with mcp_session(service, alice) as first:
            tools = {t.name for t in (await first.list_tools()).tools}
            assert {"memory_save", "memory_recall", "session_context", "rank_tools"} <= tools
            saved = structured(
                await first.call_tool("memory_save", {"key": "team_name", "value": "Falcons"})
            )
            assert saved["ownerId"] == tenant.user
            outcome = {"tool_name": "get_invoice", "ok": True, "duration_ms": 40}
            assert structured(await first.call_tool("record_tool_outcome", outcome)) == {
                "accepted": 1
            }

        # a new session (another invocation, a fresh stateless app) sees what the first saved
        async with mcp_session(service, alice) as second:
            found = structured(await second.call_tool("memory_recall", {"query": "team"}))
            assert [m["value"] for m in found["memories"]] == ["Falcons"]
            context = structured(await second.call_tool("session_context", {"query": "team"}))
            assert "Falcons" in context["prompt"]
            ranked = structured(
                await second.call_tool("rank_tools", {"tool_names": ["a", "get_invoice"]})
            )
            assert {t["name"] for t in ranked["tools"]} == {"a", "get_invoice"}
            refused = await second.call_tool("memory_save", {"key": "", "value": "v"})
            assert refused.is_error
            assert "key" in refused.content[0].text

        # two users at once: bob sees nothing of alice's, and cannot forget her memory
        async with mcp_session(service, bob) as theirs, mcp_session(service, alice) as mine:
            nothing, hers = await asyncio.gather(
                theirs.call_tool("memory_recall", {"query": "team"}),
                mine.call_tool("memory_recall", {"query": "team"}),
            )
            assert structured(nothing) == {"memories": []}
            assert [m["id"] for m in structured(hers)["memories"]] == [saved["id"]]
            forgot = await theirs.call_tool("memory_forget", {"memory_id": saved["id"]})
            assert forgot.is_error
        async with mcp_session(service, alice) as again:
            still = structured(await again.call_tool("memory_recall", {"query": "team"}))
            assert [m["id"] for m in still["memories"]] == [saved["id"]]

    asyncio.run(run())


def test_answers_are_json_and_nothing_without_a_token(service: LocalEngram, tenant: Tenant) -> None:
    token = service.token(tenant.user, tenant.team)
    initialize = {
        "jsonrpc": "2.0",
        "id": 1,
        "method": "initialize",
        "params": {
            "protocolVersion": "2025-06-18",
            "capabilities": {},
            "clientInfo": {"name": "probe", "version": "0"},
        },
    }
    accept = {"Accept": "application/json, text/event-stream", "Content-Type": "application/json"}
    with service.http() as http:
        anonymous = http.post(MCP_PATH, json=initialize, headers=accept)
        assert anonymous.status_code == 401
        answered = http.post(
            MCP_PATH, json=initialize, headers={**accept, "Authorization": f"Bearer {token}"}
        )
        assert answered.status_code == 200
        assert answered.headers["content-type"].startswith("application/json")
        assert answered.json()["result"]["serverInfo"]["name"] == "engram"
        assert "mcp-session-id" not in answered.headers  # stateless: no session to resume
