"""Engram's tools for models, as an MCP server on the official ``mcp`` SDK (major version 2,
``mcp.server.mcpserver.MCPServer``).

The tools reach Engram through ``AsyncEngramClient``: ``build_server(clients)`` takes how to
get a client for the caller of one tool call (``clients(ctx)``, an async context manager), so
the same server runs over stdio (one client, the token from the environment) and over
Streamable HTTP (a client per request, with the bearer token the request carried). Identity
always comes from that token, never from a tool argument: no tool takes a user id.

A failed call (the service refused the arguments, the memory does not exist, the service is
down) comes back as a tool result with ``isError`` and a message naming the problem, so the
model can correct itself; the SDK does the same for arguments that do not fit a tool's schema.
"""

from __future__ import annotations

import contextlib
from collections.abc import AsyncIterator, Callable
from contextlib import AbstractAsyncContextManager
from typing import Annotated, Any

from mcp.server.mcpserver import Context, MCPServer
from mcp.server.mcpserver.exceptions import ToolError
from pydantic import Field

from engram_client._async import AsyncEngramClient
from engram_client._errors import EngramAPIError, EngramError

ClientFactory = Callable[[Context], AbstractAsyncContextManager[AsyncEngramClient]]
"""Gives the client for the caller of one tool call (closed, or not, when the call ends)."""

SERVER_NAME = "engram"
INSTRUCTIONS = (
    "Long-term memory of the user you are talking to. Call session_context once at the start "
    "of a conversation and follow its prompt. Save what the user asks you to remember, or a "
    "durable fact about them, with memory_save; look things up with memory_recall; remove "
    "what the user wants forgotten with memory_forget. After calling one of your other tools, "
    "report how it went with record_tool_outcome; rank_tools orders tools by relevance plus "
    "what this user relies on."
)

PersonaId = Annotated[
    str | None,
    Field(
        description="The assistant persona the memory belongs to, when the conversation is "
        "with one (as configured in Engram); leave it out for the user's own memory."
    ),
]


def _fail(error: EngramError) -> ToolError:
    """The message a model reads when a call failed: what, and which field when known."""
    if isinstance(error, EngramAPIError):
        fields = [
            str(d["field"]) for d in error.details or [] if isinstance(d, dict) and "field" in d
        ]
        where = f" (field: {', '.join(fields)})" if fields else ""
        return ToolError(f"{error.code}: {error.message}{where}")
    return ToolError(f"Engram could not be reached: {error}")


@contextlib.asynccontextmanager
async def _calling(clients: ClientFactory, ctx: Context) -> AsyncIterator[AsyncEngramClient]:
    async with clients(ctx) as client:
        try:
            yield client
        except EngramError as error:
            raise _fail(error) from error


def build_server(clients: ClientFactory, *, version: str = "") -> MCPServer:
    """The MCP server with Engram's tools; ``clients`` gives the caller's client per call."""
    server = MCPServer(SERVER_NAME, instructions=INSTRUCTIONS, version=version, log_level="WARNING")

    @server.tool()
    async def memory_save(
        ctx: Context,
        key: Annotated[
            str,
            Field(
                description="A short, stable name for what is remembered, in snake_case "
                "(for example preferred_name, home_city, favourite_editor). Saving the same "
                "key again replaces the value."
            ),
        ],
        value: Annotated[str, Field(description="What to remember, in a sentence or less.")],
        confidence: Annotated[
            float | None,
            Field(ge=0, le=1, description="How sure you are, from 0 to 1 (default 1)."),
        ] = None,
        persona_id: PersonaId = None,
    ) -> dict[str, Any]:
        """Remember something about the user for later conversations: a preference, a fact
        about them, or anything they asked you to remember. Do not save secrets (passwords,
        keys, card numbers)."""
        async with _calling(clients, ctx) as engram:
            saved = await engram.save(key, value, confidence=confidence, persona_id=persona_id)
        return saved.to_json()

    @server.tool()
    async def memory_recall(
        ctx: Context,
        query: Annotated[
            str | None,
            Field(description="Words to look for; leave it out to list the most recent."),
        ] = None,
        max_results: Annotated[
            int | None, Field(ge=1, le=50, description="At most this many memories (default 10).")
        ] = None,
        persona_id: PersonaId = None,
    ) -> dict[str, Any]:
        """Look up what you remember about the user, best matches first. Each memory has an
        id (for memory_forget), a key and a value."""
        async with _calling(clients, ctx) as engram:
            found = await engram.recall(query, max_results=max_results, persona_id=persona_id)
        return {"memories": [m.to_json() for m in found]}

    @server.tool()
    async def memory_forget(
        ctx: Context,
        memory_id: Annotated[
            str, Field(description="The id of the memory, as memory_recall returned it.")
        ],
    ) -> dict[str, Any]:
        """Forget one memory for good, when the user asks you to or it is no longer true."""
        async with _calling(clients, ctx) as engram:
            await engram.delete_memory(memory_id)
        return {"forgotten": memory_id}

    @server.tool()
    async def session_context(
        ctx: Context,
        query: Annotated[
            str | None,
            Field(description="The user's first message, so the memories that fit it come first."),
        ] = None,
        persona_id: PersonaId = None,
    ) -> dict[str, Any]:
        """What to know about the user at the start of a conversation: a prompt to follow,
        the behavioural facts learnt about them, their tool affinities (0 to 1) and the
        memories that fit the query."""
        async with _calling(clients, ctx) as engram:
            context = await engram.start_session(persona_id=persona_id, query=query)
        body = context.to_json()
        return {
            key: body[key]
            for key in ("prompt", "facts", "toolAffinities", "memories", "degraded")
            if key in body
        }

    @server.tool()
    async def record_tool_outcome(
        ctx: Context,
        tool_name: Annotated[str, Field(description="The name of the tool you called.")],
        ok: Annotated[bool, Field(description="True when the call did what was wanted.")],
        duration_ms: Annotated[int, Field(ge=0, description="How long the call took, in ms.")],
        error: Annotated[
            str | None, Field(description="What went wrong, in a few words, when it failed.")
        ] = None,
    ) -> dict[str, Any]:
        """Report how a call of one of your other tools went, so Engram learns which tools
        this user relies on (see rank_tools)."""
        event: dict[str, Any] = {
            "kind": "tool",
            "toolName": tool_name,
            "ok": ok,
            "durationMs": duration_ms,
        }
        if error is not None:
            event["error"] = error
        async with _calling(clients, ctx) as engram:
            accepted = await engram.post_events([event])
        return {"accepted": accepted.accepted}

    @server.tool()
    async def rank_tools(
        ctx: Context,
        tool_names: Annotated[
            list[str],
            Field(
                min_length=1,
                description="The names of the tools to order, each once, the most relevant "
                "to the task first when you know.",
            ),
        ],
        scores: Annotated[
            dict[str, float] | None,
            Field(
                description="Relevance of each tool to the task on your own scale (for "
                "example a catalogue search's scores); left out, every tool scores 0."
            ),
        ] = None,
    ) -> dict[str, Any]:
        """Order tools by relevance plus how well they worked for this user: each tool's
        score + 2 x its affinity (from -1, keeps failing, to 1, keeps working). Affinity is a
        tiebreaker: tools whose scores differ by more than 4 keep their order."""
        relevance = scores or {}
        candidates = [(name, relevance.get(name, 0.0)) for name in tool_names]
        async with _calling(clients, ctx) as engram:
            ranking = await engram.rank_tools(candidates)
        return {
            "tools": [
                {"name": t.name, "affinity": t.affinity, "boostedScore": t.boosted_score}
                for t in ranking.tools
            ]
        }

    return server
