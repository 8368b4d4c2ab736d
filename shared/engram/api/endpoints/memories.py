"""The memories function's endpoints: every /v1 route but ingest and sessions, and
``GET /v1/health``.

Facts (Redis), memories, tools, review, personas, team settings, team insights (PostgreSQL),
export and erasure (both). A write PostgreSQL cannot accept answers 503; anything the caller
may not see answers 404. (``GET /v1/openapi.json`` is ``engram.api.routes.get_openapi``.)
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

from engram import __version__
from engram.api.http import etag, if_match_versions
from engram.api.models import (
    ApproveRequest,
    BulkReviewRequest,
    HealthResponse,
    MemoryGetQuery,
    MemoryHistoryQuery,
    MemoryListQuery,
    MemoryMergeRequest,
    MemoryPatchRequest,
    MemoryRecallQuery,
    MemoryRestoreRequest,
    MemorySaveRequest,
    PersonaRequest,
    ReviewListQuery,
    TeamSettingsRequest,
    ToolCallRequest,
    ToolRankRequest,
)
from engram.api.presenters import (
    bulk_review_response,
    domain_insights,
    erasure_receipt,
    export_response,
    facts_response,
    memory_history,
    memory_list,
    memory_out,
    memory_page,
    persona_list,
    persona_response,
    review_page,
    saved_out,
    team_settings_response,
    tool_call_response,
    tool_insights,
    tool_rank_response,
    tools_response,
)
from engram.api.tool_calls import (
    CALL_MODELS,
    ToolCallQuery,
    ToolsQuery,
    agreed,
    checked_name,
    provider_call_command,
    render_result,
)
from engram.api.tools import tool_command, tool_definitions
from engram.api.web import Reply, Request, path_param
from engram.memories.models import Memory, ToolResult
from engram.use_cases.tool_ranking import rank_tools

_id = path_param  # every path id is checked by its rule (engram.api.models.PATH_PARAMETERS)


def _one(status: int, memory: Memory, *, metrics: Mapping[str, float] | None = None) -> Reply:
    """One memory, with its ``ETag`` (its version), which ``If-Match`` sends back."""
    headers = {"ETag": etag(memory.version)}
    return Reply(status, memory_out(memory), headers=headers, metrics=metrics or {})


# --- health --------------------------------------------------------------------------------
def get_health(req: Request) -> Reply:
    container = req.container

    def probe(fn: Any) -> Any:
        try:
            return "ok" if fn() else "down"
        except Exception:
            return "down"

    redis_status = probe(container.ping_redis)
    pg_status = probe(container.ping_postgres)
    body = HealthResponse(
        status="ok" if redis_status == pg_status == "ok" else "degraded",
        version=__version__,
        redis=redis_status,
        postgres=pg_status,
    )
    return Reply(200, body, headers={"Cache-Control": "no-store"})


# --- facts ---------------------------------------------------------------------------------
def get_facts(req: Request) -> Reply:
    return Reply(200, facts_response(req.container.behaviour.list_facts(req.caller.identity_id)))


def delete_fact(req: Request, fact_id: str) -> Reply:
    caller = req.caller
    req.container.behaviour.forget_fact(caller.identity_id, _id("factId", fact_id))
    return Reply(204)


# --- memories ------------------------------------------------------------------------------
def post_memory(req: Request) -> Reply:
    caller = req.caller
    command = req.body(MemorySaveRequest).command()
    memory, created, duplicate = req.container.memories.save_flagged(caller, command)
    headers = {"ETag": etag(memory.version)}
    body = saved_out(memory, duplicate)
    return Reply(201 if created else 200, body, headers=headers, metrics={"MemoriesSaved": 1})


def get_memories(req: Request) -> Reply:
    caller = req.caller
    found = req.container.memories.recall(
        caller, MemoryRecallQuery.model_validate(req.query()).command()
    )
    return Reply(200, memory_list(found))


def get_memory_list(req: Request) -> Reply:
    query = MemoryListQuery.model_validate(req.query()).command()
    return Reply(200, memory_page(req.container.memories.list_memories(req.caller, query)))


def get_memory(req: Request, memory_id: str) -> Reply:
    caller = req.caller
    memory_id = _id("id", memory_id)
    as_of = MemoryGetQuery.model_validate(req.query()).as_of
    return _one(200, req.container.memories.get(caller, memory_id, as_of_ms=as_of))


def patch_memory(req: Request, memory_id: str) -> Reply:
    caller = req.caller
    memory_id = _id("id", memory_id)
    versions = if_match_versions(req.header("if-match"))
    patch = req.body(MemoryPatchRequest).command()
    memories = req.container.memories
    return _one(200, memories.update(caller, memory_id, patch, if_versions=versions))


def delete_memory(req: Request, memory_id: str) -> Reply:
    caller = req.caller
    memory_id = _id("id", memory_id)
    versions = if_match_versions(req.header("if-match"))
    req.container.memories.delete(caller, memory_id, if_versions=versions)
    return Reply(204)


def archive_memory(req: Request, memory_id: str) -> Reply:
    caller = req.caller
    memory_id = _id("id", memory_id)
    versions = if_match_versions(req.header("if-match"))
    memories = req.container.memories
    return _one(200, memories.archive(caller, memory_id, if_versions=versions))


def get_memory_history(req: Request, memory_id: str) -> Reply:
    caller = req.caller
    memory_id = _id("id", memory_id)
    query = MemoryHistoryQuery.model_validate(req.query())
    histories = req.container.memories.histories
    found = histories.history(caller, memory_id, after=query.after, limit=query.limit)
    return Reply(200, memory_history(found))


def restore_memory(req: Request, memory_id: str) -> Reply:
    caller = req.caller
    memory_id = _id("id", memory_id)
    versions = if_match_versions(req.header("if-match"))
    version = req.body(MemoryRestoreRequest).version
    histories = req.container.memories.histories
    return _one(200, histories.restore(caller, memory_id, version, if_versions=versions))


def merge_memory(req: Request, memory_id: str) -> Reply:
    caller = req.caller
    memory_id = _id("id", memory_id)
    versions = if_match_versions(req.header("if-match"))
    into = req.body(MemoryMergeRequest).into
    return _one(200, req.container.memories.merge(caller, memory_id, into, if_versions=versions))


# --- tools ---------------------------------------------------------------------------------
def get_tools(req: Request) -> Reply:
    _ = req.caller
    fmt = ToolsQuery.model_validate(req.query()).format
    return Reply(200, tools_response(fmt, tool_definitions(fmt)))


def post_tools_rank(req: Request) -> Reply:
    caller = req.caller
    ranking = rank_tools(req.container.behaviour, caller, req.body(ToolRankRequest).command())
    return Reply(200, tool_rank_response(ranking))


def post_tool(req: Request, name: str) -> Reply:
    name = _id("name", name)
    query = ToolCallQuery.model_validate(req.query())
    caller = req.caller.model_copy(update={"surface": f"tool:{query.format}"})
    tools = req.container.memories.tools
    if query.format == "json_schema":
        body = req.body(ToolCallRequest, empty_as_object=True)
        command = tool_command(
            name,
            body.arguments,
            persona_id=agreed("personaId", body.persona_id, query.persona_id),
            source_channel_id=agreed(
                "sourceChannelId", body.source_channel_id, query.source_channel_id
            ),
        )
        return Reply(200, tool_call_response(tools.execute(caller, command)))
    call = req.body(CALL_MODELS[query.format])
    checked_name(call, name)
    called = provider_call_command(call, name, query.persona_id, query.source_channel_id)
    if isinstance(called, ToolResult):  # the model's arguments are refused: it reads why
        return Reply(200, render_result(query.format, call.call_id(), called))
    result = tools.execute(caller, called, errors_as_results=True)
    return Reply(200, render_result(query.format, call.call_id(), result))


# --- review --------------------------------------------------------------------------------
def get_review(req: Request) -> Reply:
    caller = req.caller
    page = req.container.memories.review.list_pending(
        caller, ReviewListQuery.model_validate(req.query()).command()
    )
    return Reply(200, review_page(page))


def approve(req: Request, memory_id: str) -> Reply:
    caller = req.caller
    memory_id = _id("id", memory_id)
    edit = req.body(ApproveRequest, empty_as_object=True).command()
    return _one(200, req.container.memories.review.approve(caller, memory_id, edit))


def reject(req: Request, memory_id: str) -> Reply:
    caller = req.caller
    return _one(200, req.container.memories.review.reject(caller, _id("id", memory_id)))


def post_review_bulk(req: Request) -> Reply:
    caller = req.caller
    bulk = req.body(BulkReviewRequest).command()
    outcomes = req.container.memories.review.review_many(caller, bulk)
    return Reply(200, bulk_review_response(outcomes))


# --- personas and team settings ------------------------------------------------------------
def get_personas(req: Request) -> Reply:
    return Reply(200, persona_list(req.container.memories.personas.list_personas(req.caller)))


def put_persona(req: Request, persona_id: str) -> Reply:
    caller = req.caller
    persona_id = _id("personaId", persona_id)
    command = req.body(PersonaRequest).command(persona_id)
    persona = req.container.memories.personas.put_persona(caller, command)
    return Reply(200, persona_response(persona))


def get_persona(req: Request, persona_id: str) -> Reply:
    caller = req.caller
    persona = req.container.memories.personas.get_persona(caller, _id("personaId", persona_id))
    return Reply(200, persona_response(persona))


def put_team_settings(req: Request) -> Reply:
    caller = req.caller
    command = req.body(TeamSettingsRequest).command()
    saved = req.container.memories.personas.put_team_settings(caller, command)
    return Reply(200, team_settings_response(saved))


def get_team_settings(req: Request) -> Reply:
    settings = req.container.memories.personas.get_team_settings(req.caller)
    return Reply(200, team_settings_response(settings))


# --- team insights (team admins) -----------------------------------------------------------
def get_tool_insights(req: Request) -> Reply:
    return Reply(200, tool_insights(req.container.insights.read(req.caller)))


def get_domain_insights(req: Request) -> Reply:
    return Reply(200, domain_insights(req.container.insights.read(req.caller)))


# --- the caller's data ---------------------------------------------------------------------
def get_export(req: Request) -> Reply:
    return Reply(200, export_response(req.container.me.export(req.caller)))


def delete_me(req: Request) -> Reply:
    receipt = req.container.me.erase(req.caller)
    return Reply(200, erasure_receipt(receipt), metrics={"UsersErased": 1})
