"""``engram-mcp --url URL`` over stdio against ``engram serve``, driven by the ``mcp`` SDK's own
client: the tools, save and recall, the session context, an outcome that ranks a tool first, a
failure returned with ``isError``, and a second user's token that sees nothing of the first's."""

from __future__ import annotations

import asyncio
import json
import sys
import time
from pathlib import Path
from typing import Any

from mcp import Client
from mcp.client.stdio import StdioServerParameters
from tests.e2e.harness import LocalEngram, Tenant
from tests.support.mcp_tools import MCP_TOOLS

ENGRAM_MCP = Path(sys.executable).parent / "engram-mcp"  # the console script `uv sync` installs


def stdio(service: LocalEngram, token: str) -> StdioServerParameters:
    # the token travels in the environment, never in argv
    return StdioServerParameters(
        command=str(ENGRAM_MCP), args=["--url", service.url], env={"ENGRAM_TOKEN": token}
    )


def structured(result: Any) -> Any:
    assert not result.is_error, result.content
    assert json.loads(result.content[0].text) == result.structured_content
    return result.structured_content


async def _ranked_first(client: Client, tool: str, timeout_s: float = 45) -> list[dict[str, Any]]:
    """Rank until the asynchronously ingested outcomes put ``tool`` first (bounded)."""
    deadline = time.monotonic() + timeout_s
    while True:
        # a session start consolidates what was recorded; ranking reads what it left
        structured(await client.call_tool("session_context", {}))
        ranked = structured(await client.call_tool("rank_tools", {"tool_names": ["other", tool]}))
        if ranked["tools"][0]["name"] == tool or time.monotonic() > deadline:
            return list(ranked["tools"])
        await asyncio.sleep(0.3)


def test_a_desktop_assistant_session_over_stdio(service: LocalEngram, tenant: Tenant) -> None:
    alice = stdio(service, service.token(tenant.user, tenant.team))
    bob = stdio(service, service.token(tenant.other_user, tenant.team))

    async def session() -> None:
        async with Client(alice) as client:
            assert {t.name for t in (await client.list_tools()).tools} == MCP_TOOLS
            saved = structured(
                await client.call_tool("memory_save", {"key": "home_city", "value": "Lyon"})
            )
            assert (saved["key"], saved["ownerId"]) == ("home_city", tenant.user)
            recalled = structured(await client.call_tool("memory_recall", {"query": "city"}))
            assert [m["value"] for m in recalled["memories"]] == ["Lyon"]
            context = structured(await client.call_tool("session_context", {"query": "city"}))
            assert "Lyon" in context["prompt"]
            assert [m["key"] for m in context["memories"]] == ["home_city"]

            for _ in range(3):
                outcome = {"tool_name": "get_account", "ok": True, "duration_ms": 80}
                accepted = await client.call_tool("record_tool_outcome", outcome)
                assert structured(accepted) == {"accepted": 1}
            ranked = await _ranked_first(client, "get_account")
            assert ranked[0]["name"] == "get_account"
            assert ranked[0]["affinity"] > 0

            refused = await client.call_tool("memory_save", {"key": "k" * 1000, "value": "v"})
            assert refused.is_error
            assert "field: key" in refused.content[0].text
            missing = await client.call_tool("memory_forget", {"memory_id": "no-such-memory"})
            assert missing.is_error
            assert "not_found" in missing.content[0].text

        async with Client(bob) as other:
            theirs = structured(await other.call_tool("memory_recall", {"query": "city"}))
            assert theirs == {"memories": []}
            forgot = await other.call_tool("memory_forget", {"memory_id": saved["id"]})
            assert forgot.is_error  # bob cannot reach alice's memory

        async with Client(alice) as client:
            still = structured(await client.call_tool("memory_recall", {"query": "city"}))
            assert [m["id"] for m in still["memories"]] == [saved["id"]]
            assert structured(
                await client.call_tool("memory_forget", {"memory_id": saved["id"]})
            ) == {"forgotten": saved["id"]}
            gone = structured(await client.call_tool("memory_recall", {"query": "city"}))
            assert gone == {"memories": []}

    asyncio.run(session())


def test_engram_mcp_refuses_to_start_without_a_token(service: LocalEngram) -> None:
    import subprocess

    done = subprocess.run(
        [str(ENGRAM_MCP), "--url", service.url],
        env={"PATH": "/usr/bin:/bin"},
        capture_output=True,
        text=True,
        timeout=60,
        check=False,
    )
    assert done.returncode == 2
    assert "ENGRAM_TOKEN" in done.stderr
