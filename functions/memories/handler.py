"""The memories function: every /v1 route but ingest and sessions, and ``GET /v1/health``.

Facts (Redis), memories, tools, review, personas, team settings (PostgreSQL), export and
erasure (both). A write PostgreSQL cannot accept answers 503; anything the caller may not see
answers 404.
"""

from __future__ import annotations

from importlib.metadata import PackageNotFoundError, version
from typing import Any

from engram.api.http import json_response
from engram.api.models import (
    ApproveRequest,
    ExtractionSettingsOut,
    FactsResponse,
    HealthResponse,
    MemoryListResponse,
    MemoryPatchRequest,
    MemoryRecallQuery,
    MemorySaveRequest,
    PersonaRequest,
    PersonaResponse,
    RetentionSettingsOut,
    ReviewListQuery,
    ReviewListResponse,
    TeamSettingsRequest,
    TeamSettingsResponse,
    ToolCallRequest,
    ToolCallResponse,
    ToolDefinition,
    ToolsResponse,
)
from engram.errors import InvalidInput, NotFound
from engram.observability import add_metric, instrument
from engram.use_cases.convert import epoch_ms, fact_out, memory_out
from engram.use_cases.routing import Request, Route, dispatch

MAX_PATH_ID_CHARS = 128


def _id(req: Request, name: str) -> str:
    value = req.path(name)
    if len(value) > MAX_PATH_ID_CHARS or not value.isprintable():
        raise InvalidInput(name, f"must be 1-{MAX_PATH_ID_CHARS} printable characters")
    return value


def _version() -> str:
    try:
        return version("engram")
    except PackageNotFoundError:
        return "0+unknown"


# --- health --------------------------------------------------------------------------------
def get_health(req: Request) -> dict[str, Any]:
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
        version=_version(),
        redis=redis_status,
        postgres=pg_status,
    )
    return json_response(200, body, headers={"Cache-Control": "no-store"})


# --- facts ---------------------------------------------------------------------------------
def get_facts(req: Request) -> dict[str, Any]:
    facts = req.container.behaviour.list_facts(req.caller.identity_id)
    return json_response(200, FactsResponse(facts=[fact_out(f) for f in facts]))


def delete_fact(req: Request) -> dict[str, Any]:
    caller = req.caller
    if not req.container.behaviour.forget_fact(caller.identity_id, _id(req, "factId")):
        raise NotFound("fact not found")
    return json_response(204)


# --- memories ------------------------------------------------------------------------------
def post_memory(req: Request) -> dict[str, Any]:
    caller = req.caller
    body = req.body(MemorySaveRequest)
    memory, created = req.container.memories.save(
        caller,
        key=body.key,
        value=body.value,
        confidence=body.confidence,
        persona_id=body.persona_id,
        source_channel_id=body.source_channel_id,
        scope=body.scope,
    )
    add_metric("MemoriesSaved")
    return json_response(201 if created else 200, memory_out(memory))


def get_memories(req: Request) -> dict[str, Any]:
    caller = req.caller
    query = MemoryRecallQuery.model_validate(req.query())
    found = req.container.memories.recall(
        caller, query=query.query or "", max_results=query.max_results, persona_id=query.persona_id
    )
    return json_response(200, MemoryListResponse(memories=[memory_out(m) for m in found]))


def get_memory(req: Request) -> dict[str, Any]:
    caller = req.caller
    return json_response(200, memory_out(req.container.memories.get(caller, _id(req, "id"))))


def patch_memory(req: Request) -> dict[str, Any]:
    caller = req.caller
    memory_id = _id(req, "id")
    body = req.body(MemoryPatchRequest)
    memory = req.container.memories.update(
        caller, memory_id, key=body.key, value=body.value, confidence=body.confidence
    )
    return json_response(200, memory_out(memory))


def delete_memory(req: Request) -> dict[str, Any]:
    caller = req.caller
    req.container.memories.delete(caller, _id(req, "id"))
    return json_response(204)


def archive_memory(req: Request) -> dict[str, Any]:
    caller = req.caller
    return json_response(200, memory_out(req.container.memories.archive(caller, _id(req, "id"))))


# --- tools ---------------------------------------------------------------------------------
def get_tools(req: Request) -> dict[str, Any]:
    _ = req.caller
    definitions = req.container.memories.tool_definitions("json_schema")
    tools = [
        ToolDefinition(name=d["name"], description=d["description"], input_schema=d["parameters"])
        for d in definitions
    ]
    return json_response(200, ToolsResponse(tools=tools))


def post_tool(req: Request) -> dict[str, Any]:
    caller = req.caller
    name = _id(req, "name")
    body = req.body(ToolCallRequest, empty_as_object=True)
    result = req.container.memories.execute_tool(
        caller,
        name,
        dict(body.arguments),
        persona_id=body.persona_id,
        source_channel_id=body.source_channel_id,
    )
    payload = result.model_dump(mode="json", by_alias=True)
    payload["memories"] = [memory_out(m).model_dump(mode="json") for m in result.memories]
    return json_response(200, ToolCallResponse(name=result.name, result=payload))


# --- review --------------------------------------------------------------------------------
def get_review(req: Request) -> dict[str, Any]:
    caller = req.caller
    query = ReviewListQuery.model_validate(req.query())
    page = req.container.memories.list_pending(
        caller, persona_id=query.persona_id, limit=query.limit, cursor=query.cursor
    )
    return json_response(
        200,
        ReviewListResponse(
            memories=[memory_out(m) for m in page.memories], next_cursor=page.next_cursor
        ),
    )


def approve(req: Request) -> dict[str, Any]:
    caller = req.caller
    memory_id = _id(req, "id")
    body = req.body(ApproveRequest, empty_as_object=True)
    memory = req.container.memories.approve(caller, memory_id, key=body.key, value=body.value)
    return json_response(200, memory_out(memory))


def reject(req: Request) -> dict[str, Any]:
    caller = req.caller
    return json_response(200, memory_out(req.container.memories.reject(caller, _id(req, "id"))))


# --- personas and team settings ------------------------------------------------------------
def _retention_out(rule: Any) -> RetentionSettingsOut:
    return RetentionSettingsOut(
        archive_after_days=rule.archive_after_days,
        delete_archived_after_days=rule.delete_archived_after_days,
    )


def _persona_out(persona: Any) -> PersonaResponse:
    return PersonaResponse(
        persona_id=persona.persona_id,
        team_id=persona.team_id,
        allowed_groups=list(persona.allowed_groups),
        memory_enabled=persona.memory_enabled,
        extraction=ExtractionSettingsOut(
            enabled=persona.extraction.enabled, prompt=persona.extraction.prompt
        ),
        retention=_retention_out(persona.retention),
        updated_at=epoch_ms(persona.updated_at) if persona.updated_at else None,
    )


def put_persona(req: Request) -> dict[str, Any]:
    caller = req.caller
    persona_id = _id(req, "personaId")
    body = req.body(PersonaRequest)
    # ``retention`` left out keeps the stored rules, so it is passed only when sent
    config = body.model_dump(mode="json", by_alias=True, exclude={"retention"})
    if "retention" in body.model_fields_set:
        config["retention"] = (
            None if body.retention is None else body.retention.model_dump(by_alias=True)
        )
    persona = req.container.memories.put_persona(caller, persona_id, config)
    return json_response(200, _persona_out(persona))


def get_persona(req: Request) -> dict[str, Any]:
    caller = req.caller
    persona = req.container.memories.get_persona(caller, _id(req, "personaId"))
    return json_response(200, _persona_out(persona))


def put_team_settings(req: Request) -> dict[str, Any]:
    caller = req.caller
    body = req.body(TeamSettingsRequest)
    changes: dict[str, Any] = {}
    if "retention" in body.model_fields_set:  # left out keeps the stored rules
        changes["retention"] = (
            None if body.retention is None else body.retention.model_dump(by_alias=True)
        )
    saved = req.container.memories.put_team_settings(
        caller, memory_enabled=body.memory_enabled, **changes
    )
    return json_response(
        200,
        TeamSettingsResponse(
            team_id=caller.team_id,
            memory_enabled=saved.memory_enabled,
            retention=_retention_out(saved.retention),
            updated_at=epoch_ms(saved.updated_at) if saved.updated_at else None,
        ),
    )


# --- the caller's data ---------------------------------------------------------------------
def get_export(req: Request) -> dict[str, Any]:
    return json_response(200, req.container.me.export(req.caller))


def delete_me(req: Request) -> dict[str, Any]:
    receipt = req.container.me.erase(req.caller)
    add_metric("UsersErased")
    return json_response(200, receipt)


ROUTES: dict[str, Route] = {
    "GET /v1/health": get_health,
    "GET /v1/facts": get_facts,
    "DELETE /v1/facts/{factId}": delete_fact,
    "POST /v1/memories": post_memory,
    "GET /v1/memories": get_memories,
    "GET /v1/memories/{id}": get_memory,
    "PATCH /v1/memories/{id}": patch_memory,
    "DELETE /v1/memories/{id}": delete_memory,
    "POST /v1/memories/{id}/archive": archive_memory,
    "GET /v1/tools": get_tools,
    "POST /v1/tools/{name}": post_tool,
    "GET /v1/review": get_review,
    "POST /v1/review/{id}/approve": approve,
    "POST /v1/review/{id}/reject": reject,
    "PUT /v1/personas/{personaId}": put_persona,
    "GET /v1/personas/{personaId}": get_persona,
    "PUT /v1/settings/team": put_team_settings,
    "GET /v1/me/export": get_export,
    "DELETE /v1/me": delete_me,
}


@instrument
def handler(event: dict[str, Any], context: Any) -> dict[str, Any]:
    return dispatch(event, ROUTES)
