"""Request and response models of the v1 HTTP API (SPEC §4).

Every JSON name is camelCase. Request models forbid unknown fields and are strict about types
(``"5"`` is not a number), so bad input is rejected with an error naming the field (the
pydantic ``loc`` joined with ``.``, see ``engram.api.errors``). Response models serialise by
alias and can be built in Python with snake_case names.

Text fields reject NUL characters and unpaired UTF-16 surrogates: neither can be stored in
PostgreSQL or encoded as UTF-8, so they are bad input rather than a later 500.
"""

from __future__ import annotations

import json
from typing import Annotated, Any, Literal

from pydantic import (
    AfterValidator,
    BaseModel,
    ConfigDict,
    Field,
    JsonValue,
    StringConstraints,
    field_validator,
    model_validator,
)
from pydantic.alias_generators import to_camel

from engram.api.errors import InvalidJsonError
from engram.api.http import decode_json

# --- limits (SPEC §4) ----------------------------------------------------------------------
MAX_KEY_CHARS = 100
MAX_VALUE_CHARS = 2000
MAX_CONTENT_CHARS = 1000
MAX_METADATA_BYTES = 4 * 1024
MAX_BATCH_ITEMS = 100
MAX_TOOL_RESULT_BYTES = 64 * 1024
MAX_ID_CHARS = 128
MAX_NAME_CHARS = 100
MAX_TRANSCRIPT_MESSAGES = 500
MAX_MESSAGE_CHARS = 16_000
MAX_PROMPT_CHARS = 8000
MAX_GROUPS = 100
MAX_RECALL_RESULTS = 100
DEFAULT_RECALL_RESULTS = 20
MAX_EPOCH_MS = 253_402_300_799_999  # 9999-12-31T23:59:59.999Z

ObservationTypeName = Literal["tool_success", "tool_failure", "entity_access", "query_pattern"]
FactCategoryName = Literal[
    "tool_affinity", "tool_avoidance", "entity_frequency", "domain_preference", "failure_pattern"
]
MemoryScope = Literal["user", "persona", "persona_user"]
MemoryStatus = Literal["active", "pending_review", "archived"]
MessageRole = Literal["user", "assistant", "system", "tool"]


def _clean_text(value: str) -> str:
    """Reject characters that cannot be stored: NUL and unpaired surrogates."""
    if "\x00" in value:
        raise ValueError("must not contain NUL characters")
    try:
        value.encode("utf-8")
    except UnicodeEncodeError:
        raise ValueError("must be valid Unicode (unpaired surrogate)") from None
    return value


def _no_control(value: str) -> str:
    if any(ord(c) < 32 or ord(c) == 127 for c in value):
        raise ValueError("must not contain control characters")
    return value


def _json_size(value: object) -> int:
    return len(json.dumps(value, ensure_ascii=False, separators=(",", ":")).encode("utf-8"))


def _clean_json(value: JsonValue) -> JsonValue:
    """Walk a JSON value and reject NUL / surrogates in every key and string."""
    if isinstance(value, str):
        return _clean_text(value)
    if isinstance(value, list):
        for item in value:
            _clean_json(item)
    elif isinstance(value, dict):
        for key, item in value.items():
            _clean_text(key)
            _clean_json(item)
    return value


def _metadata_limit(value: dict[str, JsonValue]) -> dict[str, JsonValue]:
    _clean_json(value)
    if _json_size(value) > MAX_METADATA_BYTES:
        raise ValueError(f"must be at most {MAX_METADATA_BYTES} bytes as JSON")
    return value


def _result_limit(value: JsonValue) -> JsonValue:
    _clean_json(value)
    if _json_size(value) > MAX_TOOL_RESULT_BYTES:
        raise ValueError(f"must be at most {MAX_TOOL_RESULT_BYTES} bytes as JSON")
    return value


Text = Annotated[str, AfterValidator(_clean_text)]
#: A short identifier: no control characters, no surrounding whitespace.
Identifier = Annotated[
    str,
    StringConstraints(min_length=1, max_length=MAX_ID_CHARS, strip_whitespace=True),
    AfterValidator(_clean_text),
    AfterValidator(_no_control),
]
Name = Annotated[
    str,
    StringConstraints(min_length=1, max_length=MAX_NAME_CHARS, strip_whitespace=True),
    AfterValidator(_clean_text),
    AfterValidator(_no_control),
]
MemoryKey = Annotated[
    str,
    StringConstraints(min_length=1, max_length=MAX_KEY_CHARS, strip_whitespace=True),
    AfterValidator(_clean_text),
    AfterValidator(_no_control),
]
MemoryValue = Annotated[
    str,
    StringConstraints(min_length=1, max_length=MAX_VALUE_CHARS),
    AfterValidator(_clean_text),
]
Content = Annotated[
    str, StringConstraints(min_length=1, max_length=MAX_CONTENT_CHARS), AfterValidator(_clean_text)
]
Confidence = Annotated[float, Field(ge=0.0, le=1.0, allow_inf_nan=False)]
EpochMs = Annotated[int, Field(ge=0, le=MAX_EPOCH_MS)]
Metadata = Annotated[dict[str, JsonValue], AfterValidator(_metadata_limit)]


class RequestModel(BaseModel):
    """Base of every request body: camelCase only, unknown fields rejected, strict types."""

    model_config = ConfigDict(
        alias_generator=to_camel,
        extra="forbid",
        strict=True,
        frozen=True,
        validate_by_alias=True,
        validate_by_name=False,
        serialize_by_alias=True,
    )


class QueryModel(BaseModel):
    """Base of query-string models: values arrive as strings, so types are coerced."""

    model_config = ConfigDict(
        alias_generator=to_camel,
        extra="forbid",
        frozen=True,
        validate_by_alias=True,
        validate_by_name=True,
        serialize_by_alias=True,
    )


class ResponseModel(BaseModel):
    """Base of every response body: built with snake_case, serialised as camelCase."""

    model_config = ConfigDict(
        alias_generator=to_camel,
        validate_by_alias=True,
        validate_by_name=True,
        serialize_by_alias=True,
    )


# --- errors --------------------------------------------------------------------------------
class ErrorDetail(ResponseModel):
    code: str
    message: str
    details: JsonValue | None = None


class ErrorBody(ResponseModel):
    """``{"error": {"code", "message", "details"?}}``."""

    error: ErrorDetail


# --- health --------------------------------------------------------------------------------
DependencyStatus = Literal["ok", "down", "unknown"]


class HealthResponse(ResponseModel):
    status: Literal["ok", "degraded"]
    version: str
    redis: DependencyStatus = "unknown"
    postgres: DependencyStatus = "unknown"


# --- ingest --------------------------------------------------------------------------------
class ObservationIn(RequestModel):
    """One typed observation. ``id`` makes a retry idempotent; ``createdAt`` is client time."""

    type: ObservationTypeName
    content: Content
    metadata: Metadata = Field(default_factory=dict)
    id: Identifier | None = None
    created_at: EpochMs | None = None


class ObservationsRequest(RequestModel):
    observations: list[ObservationIn] = Field(min_length=1, max_length=MAX_BATCH_ITEMS)


class QueryEvent(RequestModel):
    kind: Literal["query"]
    text: Content


class ToolEvent(RequestModel):
    kind: Literal["tool"]
    tool_name: Name
    ok: bool
    duration_ms: Annotated[int, Field(ge=0, le=86_400_000)]
    error: Annotated[str, StringConstraints(max_length=MAX_CONTENT_CHARS)] | None = None
    result: Annotated[JsonValue, AfterValidator(_result_limit)] = None

    @field_validator("error")
    @classmethod
    def _error_text(cls, value: str | None) -> str | None:
        return None if value is None else _clean_text(value)


Event = Annotated[QueryEvent | ToolEvent, Field(discriminator="kind")]


class EventsRequest(RequestModel):
    events: list[Event] = Field(min_length=1, max_length=MAX_BATCH_ITEMS)


class AcceptedResponse(ResponseModel):
    """202: every record was durably queued."""

    accepted: int
    ids: list[str]


# --- sessions and facts --------------------------------------------------------------------
class SessionRequest(RequestModel):
    persona_id: Identifier | None = None
    query: Content | None = None


class FactOut(ResponseModel):
    """A fact as the seed defines it; ``confidence`` is the current (decayed) value."""

    id: str
    identity_id: str
    category: FactCategoryName
    subject: str
    content: str
    confidence: float
    reinforcement_count: int
    last_reinforced_at: int
    created_at: int
    updated_at: int
    ease_factor: float | None = None


class FactsResponse(ResponseModel):
    facts: list[FactOut]


class MemoryOut(ResponseModel):
    id: str
    scope: MemoryScope
    owner_id: str
    user_id: str | None = None
    key: str
    value: str
    source_channel_id: str | None = None
    confidence: float
    status: MemoryStatus
    created_at: int
    updated_at: int


class SessionSections(ResponseModel):
    facts: str
    memories: str


class SessionResponse(ResponseModel):
    identity_id: str
    persona_id: str | None = None
    facts: list[FactOut]
    tool_affinities: dict[str, float]
    memories: list[MemoryOut]
    prompt: str
    sections: SessionSections
    degraded: list[str] = Field(default_factory=list)


# --- memories ------------------------------------------------------------------------------
class MemorySaveRequest(RequestModel):
    """memory_save. 201 when new, 200 when the same key was updated."""

    key: MemoryKey
    value: MemoryValue
    confidence: Confidence | None = None
    persona_id: Identifier | None = None
    source_channel_id: Identifier | None = None
    scope: MemoryScope | None = None


class MemoryRecallQuery(QueryModel):
    """``GET /v1/memories?query=&maxResults=&personaId=``."""

    query: Annotated[str, StringConstraints(max_length=MAX_CONTENT_CHARS)] | None = None
    max_results: Annotated[int, Field(ge=1, le=MAX_RECALL_RESULTS)] = DEFAULT_RECALL_RESULTS
    persona_id: Identifier | None = None

    @field_validator("query")
    @classmethod
    def _query_text(cls, value: str | None) -> str | None:
        return None if value is None else _clean_text(value)


class MemoryPatchRequest(RequestModel):
    key: MemoryKey | None = None
    value: MemoryValue | None = None
    confidence: Confidence | None = None

    @model_validator(mode="after")
    def _not_empty(self) -> MemoryPatchRequest:
        if self.key is None and self.value is None and self.confidence is None:
            raise ValueError("at least one of key, value, confidence is required")
        return self


class MemoryListResponse(ResponseModel):
    memories: list[MemoryOut]


# --- tools ---------------------------------------------------------------------------------
ToolName = Literal["memory_save", "memory_recall"]


class MemorySaveArgs(BaseModel):
    """Arguments of the ``memory_save`` tool, as a model sends them (snake_case)."""

    model_config = ConfigDict(extra="forbid", frozen=True)

    key: MemoryKey
    value: MemoryValue
    confidence: Confidence | None = None


class MemoryRecallArgs(BaseModel):
    """Arguments of the ``memory_recall`` tool, as a model sends them (snake_case)."""

    model_config = ConfigDict(extra="forbid", frozen=True)

    query: Annotated[str, StringConstraints(max_length=MAX_CONTENT_CHARS)] | None = None
    max_results: Annotated[int, Field(ge=1, le=MAX_RECALL_RESULTS)] = DEFAULT_RECALL_RESULTS

    @field_validator("query")
    @classmethod
    def _query_text(cls, value: str | None) -> str | None:
        return None if value is None else _clean_text(value)


TOOL_ARGUMENTS: dict[str, type[BaseModel]] = {
    "memory_save": MemorySaveArgs,
    "memory_recall": MemoryRecallArgs,
}


class ToolCallRequest(RequestModel):
    """``POST /v1/tools/{name}``: the model's arguments, as an object or a JSON string."""

    arguments: dict[str, JsonValue] = Field(default_factory=dict)
    persona_id: Identifier | None = None
    source_channel_id: Identifier | None = None

    @field_validator("arguments", mode="before")
    @classmethod
    def _decode_arguments(cls, value: Any) -> Any:
        if isinstance(value, str):
            try:  # the same strict decoder as request bodies (depth, digits, NaN)
                value = decode_json(value) if value.strip() else {}
            except InvalidJsonError:
                raise ValueError("must be a JSON object or a string holding one") from None
        if not isinstance(value, dict):
            raise ValueError("must be a JSON object or a string holding one")
        _clean_json(value)
        return value


class ToolDefinition(ResponseModel):
    name: str
    description: str
    input_schema: dict[str, JsonValue]


class ToolsResponse(ResponseModel):
    tools: list[ToolDefinition]


class ToolCallResponse(ResponseModel):
    name: str
    result: JsonValue


# --- transcripts ---------------------------------------------------------------------------
class TranscriptMessage(RequestModel):
    role: MessageRole
    content: Annotated[str, StringConstraints(min_length=1, max_length=MAX_MESSAGE_CHARS)]
    at: EpochMs | None = None

    @field_validator("content")
    @classmethod
    def _content_text(cls, value: str) -> str:
        return _clean_text(value)


class TranscriptRequest(RequestModel):
    persona_id: Identifier | None = None
    messages: list[TranscriptMessage] = Field(min_length=1, max_length=MAX_TRANSCRIPT_MESSAGES)


class QueuedResponse(ResponseModel):
    """202 for ``POST /v1/conversations/{conversationId}/transcript``."""

    queued: bool = True
    conversation_id: str
    messages: int


# --- review --------------------------------------------------------------------------------
MAX_REVIEW_PAGE = 100
DEFAULT_REVIEW_PAGE = 50


class ReviewListQuery(QueryModel):
    """``GET /v1/review?personaId=&limit=&cursor=``: one page of pending memories, oldest
    first; pass ``nextCursor`` back as ``cursor`` for the next page."""

    persona_id: Identifier | None = None
    limit: Annotated[int, Field(ge=1, le=MAX_REVIEW_PAGE)] = DEFAULT_REVIEW_PAGE
    cursor: Annotated[str, StringConstraints(min_length=1, max_length=256)] | None = None

    @field_validator("cursor")
    @classmethod
    def _cursor_text(cls, value: str | None) -> str | None:
        return None if value is None else _no_control(_clean_text(value))


class ReviewListResponse(ResponseModel):
    memories: list[MemoryOut]
    next_cursor: str | None = None


class ApproveRequest(RequestModel):
    """``POST /v1/review/{id}/approve``: optional edits applied before approving (no body, or
    ``{}``, approves as proposed)."""

    key: MemoryKey | None = None
    value: MemoryValue | None = None


# --- personas and team settings ------------------------------------------------------------
class ExtractionSettings(RequestModel):
    enabled: bool = False
    prompt: Annotated[str, StringConstraints(max_length=MAX_PROMPT_CHARS)] | None = None

    @field_validator("prompt")
    @classmethod
    def _prompt_text(cls, value: str | None) -> str | None:
        return None if value is None else _clean_text(value)


MAX_RETENTION_DAYS = 36_500
RetentionDays = Annotated[int, Field(ge=1, le=MAX_RETENTION_DAYS)]


class RetentionSettings(RequestModel):
    """Memory retention rules; ``null`` (or left out) means no such rule."""

    archive_after_days: RetentionDays | None = Field(
        default=None, description="Archive active memories not updated for this many days."
    )
    delete_archived_after_days: RetentionDays | None = Field(
        default=None, description="Hard-delete archived memories not updated for this many days."
    )


class RetentionSettingsOut(ResponseModel):
    archive_after_days: int | None = None
    delete_archived_after_days: int | None = None


class PersonaRequest(RequestModel):
    """``PUT /v1/personas/{personaId}`` (admins). ``retention`` left out keeps the persona's
    retention rules; ``null`` removes them."""

    allowed_groups: list[Name] = Field(default_factory=list, max_length=MAX_GROUPS)
    memory_enabled: bool = True
    extraction: ExtractionSettings = Field(default_factory=ExtractionSettings)
    retention: RetentionSettings | None = None


class ExtractionSettingsOut(ResponseModel):
    enabled: bool
    prompt: str | None = None


class PersonaResponse(ResponseModel):
    persona_id: str
    team_id: str
    allowed_groups: list[str]
    memory_enabled: bool
    extraction: ExtractionSettingsOut
    retention: RetentionSettingsOut = Field(default_factory=RetentionSettingsOut)
    updated_at: int | None = None


class TeamSettingsRequest(RequestModel):
    """``PUT /v1/settings/team`` (team admins). ``retention`` left out keeps the team's
    retention rules; ``null`` removes them."""

    memory_enabled: bool
    retention: RetentionSettings | None = None


class TeamSettingsResponse(ResponseModel):
    team_id: str
    memory_enabled: bool
    retention: RetentionSettingsOut = Field(default_factory=RetentionSettingsOut)
    updated_at: int | None = None


# --- the caller's data ---------------------------------------------------------------------
class ObservationOut(ResponseModel):
    id: str
    identity_id: str
    type: ObservationTypeName
    content: str
    metadata: dict[str, JsonValue]
    created_at: int


class ExportResponse(ResponseModel):
    identity_id: str
    user_id: str
    team_id: str
    exported_at: int
    observations: list[ObservationOut]
    facts: list[FactOut]
    checkpoint: int | None = None
    memories: list[MemoryOut]


class ErasureCounts(ResponseModel):
    observations: int = 0
    facts: int = 0
    checkpoints: int = 0
    idempotency_records: int = 0
    memories: int = 0


class ErasureReceipt(ResponseModel):
    identity_id: str
    user_id: str
    team_id: str
    erased_at: int
    counts: ErasureCounts


# --- the route list (for the local server, OpenAPI and documentation) ----------------------
IDEMPOTENCY_HEADER = "Idempotency-Key"
MAX_IDEMPOTENCY_KEY_CHARS = 128


class RouteSpec(BaseModel):
    model_config = ConfigDict(frozen=True)

    method: Literal["GET", "POST", "PUT", "PATCH", "DELETE"]
    path: str
    summary: str
    request: type[BaseModel] | None = None
    query: type[BaseModel] | None = None
    response: type[BaseModel] | None = None
    status: int = 200
    auth: bool = True
    body_required: bool = True
    idempotency_key: bool = False
    """The route reads an ``Idempotency-Key`` header: the same key within 24 hours is the same
    request (stored once), another body under it is 422 ``idempotency_key_reused``."""

    @property
    def route_key(self) -> str:
        return f"{self.method} {self.path}"


ROUTES: tuple[RouteSpec, ...] = (
    RouteSpec(
        method="GET",
        path="/v1/health",
        summary="status of Redis and PostgreSQL",
        response=HealthResponse,
        auth=False,
    ),
    RouteSpec(
        method="POST",
        path="/v1/observations",
        summary="queue typed observations",
        request=ObservationsRequest,
        response=AcceptedResponse,
        status=202,
        idempotency_key=True,
    ),
    RouteSpec(
        method="POST",
        path="/v1/events",
        summary="queue raw query and tool events",
        request=EventsRequest,
        response=AcceptedResponse,
        status=202,
        idempotency_key=True,
    ),
    RouteSpec(
        method="POST",
        path="/v1/sessions",
        summary="consolidate and recall",
        request=SessionRequest,
        response=SessionResponse,
    ),
    RouteSpec(method="GET", path="/v1/facts", summary="the caller's facts", response=FactsResponse),
    RouteSpec(method="DELETE", path="/v1/facts/{factId}", summary="forget one fact", status=204),
    RouteSpec(
        method="POST",
        path="/v1/memories",
        summary="memory_save (201 new, 200 updated)",
        request=MemorySaveRequest,
        response=MemoryOut,
        status=201,
    ),
    RouteSpec(
        method="GET",
        path="/v1/memories",
        summary="memory_recall, scope-merged",
        query=MemoryRecallQuery,
        response=MemoryListResponse,
    ),
    RouteSpec(method="GET", path="/v1/memories/{id}", summary="one memory", response=MemoryOut),
    RouteSpec(
        method="PATCH",
        path="/v1/memories/{id}",
        summary="edit one memory",
        request=MemoryPatchRequest,
        response=MemoryOut,
    ),
    RouteSpec(method="DELETE", path="/v1/memories/{id}", summary="delete one memory", status=204),
    RouteSpec(
        method="POST",
        path="/v1/memories/{id}/archive",
        summary="archive one memory",
        response=MemoryOut,
    ),
    RouteSpec(
        method="GET",
        path="/v1/tools",
        summary="tool definitions (JSON Schema)",
        response=ToolsResponse,
    ),
    RouteSpec(
        method="POST",
        path="/v1/tools/{name}",
        summary="execute a tool call",
        request=ToolCallRequest,
        response=ToolCallResponse,
    ),
    RouteSpec(
        method="POST",
        path="/v1/conversations/{conversationId}/transcript",
        summary="queue a transcript for extraction",
        request=TranscriptRequest,
        response=QueuedResponse,
        status=202,
    ),
    RouteSpec(
        method="GET",
        path="/v1/review",
        summary="pending memories, one page (admins)",
        query=ReviewListQuery,
        response=ReviewListResponse,
    ),
    RouteSpec(
        method="POST",
        path="/v1/review/{id}/approve",
        summary="approve, optionally editing key/value first (admins)",
        request=ApproveRequest,
        body_required=False,
        response=MemoryOut,
    ),
    RouteSpec(
        method="POST", path="/v1/review/{id}/reject", summary="reject (admins)", response=MemoryOut
    ),
    RouteSpec(
        method="PUT",
        path="/v1/personas/{personaId}",
        summary="persona settings",
        request=PersonaRequest,
        response=PersonaResponse,
    ),
    RouteSpec(
        method="GET",
        path="/v1/personas/{personaId}",
        summary="persona settings",
        response=PersonaResponse,
    ),
    RouteSpec(
        method="PUT",
        path="/v1/settings/team",
        summary="team memory switch and retention",
        request=TeamSettingsRequest,
        response=TeamSettingsResponse,
    ),
    RouteSpec(
        method="GET",
        path="/v1/me/export",
        summary="everything held about the caller",
        response=ExportResponse,
    ),
    RouteSpec(method="DELETE", path="/v1/me", summary="erase the caller", response=ErasureReceipt),
)
