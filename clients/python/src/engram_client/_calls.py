"""The HTTP API, one function per operation: each builds the request (a ``Call``) and says how
its answer is read. The sync and the async client both run these, so an operation is defined
once."""

from __future__ import annotations

from collections.abc import Iterable, Mapping
from dataclasses import dataclass
from typing import Any, Generic, TypeVar
from urllib.parse import quote

from pydantic import BaseModel, TypeAdapter

from engram_client.models import (
    Accepted,
    ErasureReceipt,
    Export,
    Fact,
    Health,
    Memory,
    MemoryAction,
    MemoryHistory,
    Persona,
    Queued,
    ReviewItem,
    ReviewPage,
    SavedMemory,
    SessionContext,
    TeamSettings,
    ToolDefinition,
    ToolRanking,
    ToolResult,
)

T = TypeVar("T")
M = TypeVar("M", bound=BaseModel)


@dataclass(frozen=True)
class Call(Generic[T]):
    """One request and the reader of its decoded JSON body (``None`` for 204)."""

    method: str
    path: str
    read: Reader[T]
    json: Any = None
    params: Mapping[str, Any] | None = None
    idempotency_key: str | None = None


@dataclass(frozen=True)
class Reader(Generic[T]):
    """Reads an answer into ``model`` (the body, or its ``field``; a list when ``many``);
    ``as_json``: the JSON as it came (a provider's shapes, handed on unchanged)."""

    model: type[BaseModel] | None
    field: str | None = None
    many: bool = False
    as_json: bool = False

    def __call__(self, body: Any) -> T:
        if self.as_json:
            value = body if self.field is None else body[self.field]
            if not isinstance(value, list if self.many else dict):
                raise TypeError(f"expected a JSON {'array' if self.many else 'object'}")
            return value  # type: ignore[return-value]
        if self.model is None:
            return None  # type: ignore[return-value]
        value = body if self.field is None else body[self.field]
        if self.many:
            items = TypeAdapter(list[self.model])  # type: ignore[name-defined]
            return items.validate_python(value)  # type: ignore[return-value]
        return self.model.model_validate(value)  # type: ignore[return-value]


def _model(model: type[M], field: str | None = None) -> Reader[M]:
    return Reader(model, field)


def _models(model: type[M], field: str) -> Reader[list[M]]:
    return Reader(model, field, many=True)


_nothing: Reader[None] = Reader(None)


def _compact(**values: Any) -> dict[str, Any]:
    return {k: v for k, v in values.items() if v is not None}


def _seg(value: str) -> str:
    return quote(value, safe="")


# --- ingest and sessions -------------------------------------------------------------------
def health() -> Call[Health]:
    return Call("GET", "/v1/health", _model(Health))


def post_observations(
    observations: Iterable[Mapping[str, Any]], *, idempotency_key: str | None = None
) -> Call[Accepted]:
    body = {"observations": [dict(o) for o in observations]}
    return Call("POST", "/v1/observations", _model(Accepted), body, None, idempotency_key)


def post_events(
    events: Iterable[Mapping[str, Any]], *, idempotency_key: str | None = None
) -> Call[Accepted]:
    """Synchronous ``POST /v1/events`` (``emit`` is the fire-and-forget one)."""
    body = {"events": [dict(e) for e in events]}
    return Call("POST", "/v1/events", _model(Accepted), body, None, idempotency_key)


def start_session(persona_id: str | None = None, query: str | None = None) -> Call[SessionContext]:
    """The session-start context: prompt, facts, tool affinities and recalled memories."""
    body = _compact(personaId=persona_id, query=query)
    return Call("POST", "/v1/sessions", _model(SessionContext), body)


def send_transcript(
    conversation_id: str, messages: Iterable[Mapping[str, Any]], *, persona_id: str | None = None
) -> Call[Queued]:
    body = _compact(personaId=persona_id, messages=[dict(m) for m in messages])
    path = f"/v1/conversations/{_seg(conversation_id)}/transcript"
    return Call("POST", path, _model(Queued), body)


# --- facts and memories --------------------------------------------------------------------
def facts() -> Call[list[Fact]]:
    return Call("GET", "/v1/facts", _models(Fact, "facts"))


def forget_fact(fact_id: str) -> Call[None]:
    return Call("DELETE", f"/v1/facts/{_seg(fact_id)}", _nothing)


def save(
    key: str,
    value: str,
    *,
    confidence: float | None = None,
    persona_id: str | None = None,
    source_channel_id: str | None = None,
    scope: str | None = None,
) -> Call[SavedMemory]:
    """Save (create, or update the key's memory); ``duplicate_of`` names a close memory under
    another key when the service's embedder flags one."""
    body = _compact(
        key=key,
        value=value,
        confidence=confidence,
        personaId=persona_id,
        sourceChannelId=source_channel_id,
        scope=scope,
    )
    return Call("POST", "/v1/memories", _model(SavedMemory), body)


def recall(
    query: str | None = None,
    *,
    max_results: int | None = None,
    persona_id: str | None = None,
    as_of: int | None = None,
) -> Call[list[Memory]]:
    """``as_of`` (epoch ms): what a recall would have answered then."""
    params = _compact(query=query, maxResults=max_results, personaId=persona_id, asOf=as_of)
    return Call("GET", "/v1/memories", _models(Memory, "memories"), params=params)


def get_memory(memory_id: str, *, as_of: int | None = None) -> Call[Memory]:
    """``as_of`` (epoch ms): the memory as it was then."""
    path = f"/v1/memories/{_seg(memory_id)}"
    return Call("GET", path, _model(Memory), params=_compact(asOf=as_of) or None)


def update_memory(
    memory_id: str,
    *,
    key: str | None = None,
    value: str | None = None,
    confidence: float | None = None,
) -> Call[Memory]:
    body = _compact(key=key, value=value, confidence=confidence)
    return Call("PATCH", f"/v1/memories/{_seg(memory_id)}", _model(Memory), body)


def delete_memory(memory_id: str) -> Call[None]:
    return Call("DELETE", f"/v1/memories/{_seg(memory_id)}", _nothing)


def archive_memory(memory_id: str) -> Call[Memory]:
    return Call("POST", f"/v1/memories/{_seg(memory_id)}/archive", _model(Memory))


def memory_history(memory_id: str) -> Call[list[MemoryAction]]:
    """The memory's audit trail, oldest first (404 for one the caller may not read)."""
    path = f"/v1/memories/{_seg(memory_id)}/history"
    return Call("GET", path, _models(MemoryAction, "actions"))


def memory_versions(
    memory_id: str, *, limit: int | None = None, cursor: str | None = None
) -> Call[MemoryHistory]:
    """One page of the memory's versions, oldest first, with its audit trail (pass
    ``next_cursor`` back as ``cursor``)."""
    path = f"/v1/memories/{_seg(memory_id)}/history"
    params = _compact(limit=limit, cursor=cursor) or None
    return Call("GET", path, _model(MemoryHistory), params=params)


def restore_memory(memory_id: str, version: int) -> Call[Memory]:
    """Make ``version``'s key and value current again, as a new version."""
    path = f"/v1/memories/{_seg(memory_id)}/restore"
    return Call("POST", path, _model(Memory), {"version": version})


def merge_memory(memory_id: str, into: str) -> Call[Memory]:
    """Fold ``memory_id`` into ``into`` (the same owner and scope): its versions become
    ``into``'s earliest, it is removed; the answer is ``into`` as it now is."""
    path = f"/v1/memories/{_seg(memory_id)}/merge"
    return Call("POST", path, _model(Memory), {"into": into})


# --- tools ---------------------------------------------------------------------------------
def tools() -> Call[list[ToolDefinition]]:
    """The tools the service runs for a model, with JSON Schemas of their arguments."""
    return Call("GET", "/v1/tools", _models(ToolDefinition, "tools"))


def execute_tool(
    name: str,
    arguments: Mapping[str, Any] | str,
    persona_id: str | None = None,
    *,
    source_channel_id: str | None = None,
) -> Call[ToolResult]:
    """Run a tool call exactly as the model produced it (``arguments`` may be a JSON
    string, as OpenAI-style tool calls carry it)."""
    body = _compact(
        arguments=arguments if isinstance(arguments, str) else dict(arguments),
        personaId=persona_id,
        sourceChannelId=source_channel_id,
    )
    return Call("POST", f"/v1/tools/{_seg(name)}", _model(ToolResult), body)


def provider_tools(format: str) -> Call[list[dict[str, Any]]]:
    """The tools in a provider's format (``openai_chat``, ``openai_responses``, ``anthropic``,
    ``bedrock``, ``mcp``; ``json_schema`` too): the list to pass to that provider's API as it
    is."""
    reader: Reader[list[dict[str, Any]]] = Reader(None, "tools", many=True, as_json=True)
    return Call("GET", "/v1/tools", reader, params={"format": format})


def call_tool(
    name: str,
    call: Mapping[str, Any],
    *,
    format: str,
    persona_id: str | None = None,
    source_channel_id: str | None = None,
) -> Call[dict[str, Any]]:
    """Run a model's tool call exactly as the provider's API sent it (an OpenAI ``tool_calls``
    item or ``function_call`` item, an Anthropic ``tool_use`` block, a Bedrock ``toolUse``
    block, MCP ``tools/call`` params); the answer is the tool result in that provider's shape,
    to append to the conversation as it is. Arguments the tool refuses come back as an error
    result the model can read, not as an exception."""
    params = _compact(format=format, personaId=persona_id, sourceChannelId=source_channel_id)
    reader: Reader[dict[str, Any]] = Reader(None, as_json=True)
    return Call("POST", f"/v1/tools/{_seg(name)}", reader, dict(call), params)


def rank_tools(candidates: Mapping[str, float] | Iterable[tuple[str, float]]) -> Call[ToolRanking]:
    """Order a tool catalogue — ``{name: score}`` or ``(name, score)`` pairs, scores on your
    own relevance scale — by ``score + 2 × affinity`` with the user's current affinities
    (``POST /v1/tools/rank``): a tiebreaker, scores more than 4 apart keep their order."""
    pairs = candidates.items() if isinstance(candidates, Mapping) else candidates
    body = {"candidates": [{"name": name, "score": score} for name, score in pairs]}
    return Call("POST", "/v1/tools/rank", _model(ToolRanking), body)


# --- review --------------------------------------------------------------------------------
def review_queue() -> Call[list[ReviewItem]]:
    """The first page of the review queue: proposals, and changes (``current`` set)."""
    return Call("GET", "/v1/review", _models(ReviewItem, "memories"))


def review_page(
    *, persona_id: str | None = None, limit: int | None = None, cursor: str | None = None
) -> Call[ReviewPage]:
    """One page of pending memories (``memories``, ``next_cursor``)."""
    params = _compact(personaId=persona_id, limit=limit, cursor=cursor)
    return Call("GET", "/v1/review", _model(ReviewPage), params=params)


def approve(memory_id: str, *, key: str | None = None, value: str | None = None) -> Call[Memory]:
    """Approve a pending memory, with ``key`` / ``value`` edited first when given."""
    edits = _compact(key=key, value=value) or None
    return Call("POST", f"/v1/review/{_seg(memory_id)}/approve", _model(Memory), edits)


def reject(memory_id: str) -> Call[Memory]:
    return Call("POST", f"/v1/review/{_seg(memory_id)}/reject", _model(Memory))


# --- personas, team settings, the caller's data --------------------------------------------
def put_persona(
    persona_id: str,
    *,
    allowed_groups: Iterable[str] = (),
    memory_enabled: bool = True,
    extraction_enabled: bool = False,
    extraction_prompt: str | None = None,
    retention: Mapping[str, int | None] | None = None,
) -> Call[Persona]:
    """``retention`` (``{archiveAfterDays, deleteArchivedAfterDays}``, each days or None)
    replaces the persona's retention rules; left out, they stay as they are."""
    body: dict[str, Any] = {
        "allowedGroups": list(allowed_groups),
        "memoryEnabled": memory_enabled,
        "extraction": _compact(enabled=extraction_enabled, prompt=extraction_prompt),
    }
    if retention is not None:
        body["retention"] = dict(retention)
    return Call("PUT", f"/v1/personas/{_seg(persona_id)}", _model(Persona), body)


def get_persona(persona_id: str) -> Call[Persona]:
    return Call("GET", f"/v1/personas/{_seg(persona_id)}", _model(Persona))


def set_team_memory(
    memory_enabled: bool, *, retention: Mapping[str, int | None] | None = None
) -> Call[TeamSettings]:
    """``retention`` as for ``put_persona`` (the team's rules)."""
    body: dict[str, Any] = {"memoryEnabled": memory_enabled}
    if retention is not None:
        body["retention"] = dict(retention)
    return Call("PUT", "/v1/settings/team", _model(TeamSettings), body)


def export() -> Call[Export]:
    return Call("GET", "/v1/me/export", _model(Export))


def erase() -> Call[ErasureReceipt]:
    return Call("DELETE", "/v1/me", _model(ErasureReceipt))
