"""The memories function: every /v1 route but ingest and sessions, and ``GET /v1/health``.

Facts (Redis), memories, tools, review, personas, team settings (PostgreSQL), export and
erasure (both). A write PostgreSQL cannot accept answers 503; anything the caller may not see
answers 404.
"""

from __future__ import annotations

from importlib.metadata import PackageNotFoundError, version
from typing import Any

from aws_lambda_powertools.event_handler import Response

from engram.adapters.apigateway import http_app, path_param, request, respond
from engram.adapters.observability import add_metric, instrument
from engram.api.models import (
    ApproveRequest,
    ExtractionSettingsOut,
    FactsResponse,
    HealthResponse,
    MemoryHistoryResponse,
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
from engram.errors import NotFound
from engram.use_cases.convert import action_out, epoch_ms, fact_out, memory_out

app = http_app()
_id = path_param  # every path id is checked by its rule (engram.api.models.PATH_PARAMETERS)


def _version() -> str:
    try:
        return version("engram")
    except PackageNotFoundError:
        return "0+unknown"


# --- health --------------------------------------------------------------------------------
@app.get("/v1/health")
def get_health() -> Response[str]:
    req = request(app)
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
    return respond(200, body, headers={"Cache-Control": "no-store"})


# --- facts ---------------------------------------------------------------------------------
@app.get("/v1/facts")
def get_facts() -> Response[str]:
    req = request(app)
    facts = req.container.behaviour.list_facts(req.caller.identity_id)
    return respond(200, FactsResponse(facts=[fact_out(f) for f in facts]))


@app.delete("/v1/facts/<fact_id>")
def delete_fact(fact_id: str) -> Response[str]:
    req = request(app)
    caller = req.caller
    if not req.container.behaviour.forget_fact(caller.identity_id, _id("factId", fact_id)):
        raise NotFound("fact not found")
    return respond(204)


# --- memories ------------------------------------------------------------------------------
@app.post("/v1/memories")
def post_memory() -> Response[str]:
    req = request(app)
    caller = req.caller
    memory, created = req.container.memories.save(caller, req.body(MemorySaveRequest))
    add_metric("MemoriesSaved")
    return respond(201 if created else 200, memory_out(memory))


@app.get("/v1/memories")
def get_memories() -> Response[str]:
    req = request(app)
    caller = req.caller
    found = req.container.memories.recall(caller, MemoryRecallQuery.model_validate(req.query()))
    return respond(200, MemoryListResponse(memories=[memory_out(m) for m in found]))


@app.get("/v1/memories/<memory_id>")
def get_memory(memory_id: str) -> Response[str]:
    req = request(app)
    caller = req.caller
    return respond(200, memory_out(req.container.memories.get(caller, _id("id", memory_id))))


@app.patch("/v1/memories/<memory_id>")
def patch_memory(memory_id: str) -> Response[str]:
    req = request(app)
    caller = req.caller
    memory_id = _id("id", memory_id)
    memory = req.container.memories.update(caller, memory_id, req.body(MemoryPatchRequest))
    return respond(200, memory_out(memory))


@app.delete("/v1/memories/<memory_id>")
def delete_memory(memory_id: str) -> Response[str]:
    req = request(app)
    caller = req.caller
    req.container.memories.delete(caller, _id("id", memory_id))
    return respond(204)


@app.post("/v1/memories/<memory_id>/archive")
def archive_memory(memory_id: str) -> Response[str]:
    req = request(app)
    caller = req.caller
    return respond(200, memory_out(req.container.memories.archive(caller, _id("id", memory_id))))


@app.get("/v1/memories/<memory_id>/history")
def memory_history(memory_id: str) -> Response[str]:
    req = request(app)
    memory_id = _id("id", memory_id)
    actions = req.container.memories.history(req.caller, memory_id)
    return respond(
        200,
        MemoryHistoryResponse(memory_id=memory_id, actions=[action_out(a) for a in actions]),
    )


# --- tools ---------------------------------------------------------------------------------
@app.get("/v1/tools")
def get_tools() -> Response[str]:
    req = request(app)
    _ = req.caller
    definitions = req.container.memories.tool_definitions("json_schema")
    tools = [
        ToolDefinition(name=d["name"], description=d["description"], input_schema=d["parameters"])
        for d in definitions
    ]
    return respond(200, ToolsResponse(tools=tools))


@app.post("/v1/tools/<name>")
def post_tool(name: str) -> Response[str]:
    req = request(app)
    caller = req.caller
    name = _id("name", name)
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
    return respond(200, ToolCallResponse(name=result.name, result=payload))


# --- review --------------------------------------------------------------------------------
@app.get("/v1/review")
def get_review() -> Response[str]:
    req = request(app)
    caller = req.caller
    page = req.container.memories.list_pending(caller, ReviewListQuery.model_validate(req.query()))
    return respond(
        200,
        ReviewListResponse(
            memories=[memory_out(m) for m in page.memories], next_cursor=page.next_cursor
        ),
    )


@app.post("/v1/review/<memory_id>/approve")
def approve(memory_id: str) -> Response[str]:
    req = request(app)
    caller = req.caller
    memory_id = _id("id", memory_id)
    body = req.body(ApproveRequest, empty_as_object=True)
    memory = req.container.memories.approve(caller, memory_id, body)
    return respond(200, memory_out(memory))


@app.post("/v1/review/<memory_id>/reject")
def reject(memory_id: str) -> Response[str]:
    req = request(app)
    caller = req.caller
    return respond(200, memory_out(req.container.memories.reject(caller, _id("id", memory_id))))


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


@app.put("/v1/personas/<persona_id>")
def put_persona(persona_id: str) -> Response[str]:
    req = request(app)
    caller = req.caller
    persona_id = _id("personaId", persona_id)
    persona = req.container.memories.put_persona(caller, persona_id, req.body(PersonaRequest))
    return respond(200, _persona_out(persona))


@app.get("/v1/personas/<persona_id>")
def get_persona(persona_id: str) -> Response[str]:
    req = request(app)
    caller = req.caller
    persona = req.container.memories.get_persona(caller, _id("personaId", persona_id))
    return respond(200, _persona_out(persona))


@app.put("/v1/settings/team")
def put_team_settings() -> Response[str]:
    req = request(app)
    caller = req.caller
    saved = req.container.memories.put_team_settings(caller, req.body(TeamSettingsRequest))
    return respond(
        200,
        TeamSettingsResponse(
            team_id=caller.team_id,
            memory_enabled=saved.memory_enabled,
            retention=_retention_out(saved.retention),
            updated_at=epoch_ms(saved.updated_at) if saved.updated_at else None,
        ),
    )


# --- the caller's data ---------------------------------------------------------------------
@app.get("/v1/me/export")
def get_export() -> Response[str]:
    req = request(app)
    return respond(200, req.container.me.export(req.caller))


@app.delete("/v1/me")
def delete_me() -> Response[str]:
    req = request(app)
    receipt = req.container.me.erase(req.caller)
    add_metric("UsersErased")
    return respond(200, receipt)


@instrument
def handler(event: dict[str, Any], context: Any) -> dict[str, Any]:
    return app.resolve(event, context)
