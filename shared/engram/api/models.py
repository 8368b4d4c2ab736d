"""The models of the v1 HTTP API: every input and every output (routes: ``engram.api.routes``).

**Inputs** are defined at the edge — behavioural memory's in ``engram.api.behaviour_inputs``,
explicit memories' (and the tools' arguments) in ``engram.api.memory_inputs``, transcripts in
``engram.api.extraction_inputs`` — on ``engram.fields.InputModel``: camelCase only, unknown
fields refused, strict types, field rules and limits from ``engram.fields`` and
``engram.limits``. Each maps to its domain command (``command()``; ``engram.memories
.commands``, ``engram.behaviour.commands``, ``engram.extraction.commands``), which the services
take as validated. Bad input is refused with an error naming the field (the pydantic ``loc``
joined with ``.``, see ``engram.api.errors``). ``PATH_PARAMETERS`` gives each path parameter
its rule.


**Outputs** (response models) serialise by alias and are built in Python with snake_case
names.
"""

from __future__ import annotations

from typing import Any, Literal

from pydantic import (
    Field,
    JsonValue,
    field_validator,
)

from engram.api.behaviour_inputs import (
    EventsRequest,
    ObservationIn,
    ObservationsRequest,
    QueryEvent,
    ToolCandidate,
    ToolEvent,
    ToolRankRequest,
)
from engram.api.errors import ErrorCode, InvalidJsonError
from engram.api.extraction_inputs import TranscriptMessage, TranscriptRequest
from engram.api.http import decode_json
from engram.api.memory_inputs import (
    ApproveRequest,
    BulkReviewRequest,
    ExtractionConfig,
    MemoryGetQuery,
    MemoryHistoryQuery,
    MemoryListQuery,
    MemoryMergeRequest,
    MemoryPatchRequest,
    MemoryRecallArgs,
    MemoryRecallQuery,
    MemoryRestoreRequest,
    MemorySaveArgs,
    MemorySaveRequest,
    PersonaRequest,
    RetentionRule,
    ReviewListQuery,
    TeamSettingsRequest,
)
from engram.api.memory_outputs import (
    CurrentOut,
    DuplicateOut,
    MemoryActionOut,
    MemoryHistoryResponse,
    MemoryListResponse,
    MemoryOut,
    MemoryPageResponse,
    MemoryVersionOut,
    PendingChangeOut,
    ReviewItemOut,
    SavedMemoryOut,
)
from engram.api.responses import EpochMs, FactCategoryOut, ObservationTypeOut, ResponseModel
from engram.api.tool_calls import ToolCallQuery, ToolsQuery
from engram.api.tools import ToolFormat
from engram.fields import (
    Content,
    FactId,
    Identifier,
    InputModel,
    JsonObject,
    Name,
    check_json,
)

FactCategoryName = Literal[
    "tool_affinity", "tool_avoidance", "entity_frequency", "domain_preference", "failure_pattern"
]


#: The rule of each path parameter (the same for every route that has it).
PATH_PARAMETERS: dict[str, Any] = {
    "id": Identifier,
    "factId": FactId,
    "name": Name,
    "personaId": Identifier,
    "conversationId": Identifier,
}


# --- errors --------------------------------------------------------------------------------
class ErrorDetail(ResponseModel):
    code: ErrorCode
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
class AcceptedResponse(ResponseModel):
    """202: every record was durably queued."""

    accepted: int
    ids: list[str]


# --- sessions and facts --------------------------------------------------------------------
class SessionRequest(InputModel):
    persona_id: Identifier | None = None
    query: Content | None = None


class FactOut(ResponseModel):
    """A learned fact; ``confidence`` is the current (decayed) value."""

    id: str
    identity_id: str
    category: FactCategoryOut
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


# --- tools ---------------------------------------------------------------------------------
class ToolCallRequest(InputModel):
    """``POST /v1/tools/{name}``: the model's arguments, as an object or a JSON string holding
    one. The tool's own arguments model (``MemorySaveArgs`` / ``MemoryRecallArgs``) checks
    them."""

    arguments: JsonObject = Field(default_factory=dict)
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
        check_json(value)
        return value


class ToolDefinition(ResponseModel):
    name: str
    description: str
    input_schema: dict[str, JsonValue]


class ToolsResponse(ResponseModel):
    """``GET /v1/tools``: ``tools`` is what the format's provider takes as its tool list."""

    format: ToolFormat = "json_schema"
    tools: list[ToolDefinition] | list[dict[str, JsonValue]]


class ToolCallResponse(ResponseModel):
    name: str
    result: JsonValue


class RankedToolOut(ResponseModel):
    """One candidate: its ``score``, the ``affinity`` used (in [-1, 1]; 0 without a fact)
    and ``boostedScore = score + boostFactor × affinity``."""

    name: str
    score: float
    affinity: float
    boosted_score: float


class ToolRankResponse(ResponseModel):
    """``POST /v1/tools/rank``: the candidates best first (equal boosted scores keep the
    order they were sent in); ``degraded`` is ``["behaviour:unavailable"]`` when the facts
    could not be read and every affinity is 0."""

    tools: list[RankedToolOut]
    boost_factor: float
    degraded: list[str] = Field(default_factory=list)


# --- transcripts ---------------------------------------------------------------------------
class QueuedResponse(ResponseModel):
    """202 for ``POST /v1/conversations/{conversationId}/transcript``."""

    queued: bool = True
    conversation_id: str
    messages: int


# --- review --------------------------------------------------------------------------------
class ReviewListResponse(ResponseModel):
    """One page of the review queue, newest first: pending proposals and change proposals
    (``current`` set); ``nextCursor`` is ``null`` on the last page."""

    memories: list[ReviewItemOut]
    next_cursor: str | None = None


class BulkReviewResult(ResponseModel):
    """The decision on one id: ``ok`` with the decided memory, or the error this id alone met
    (``conflict`` when it was already decided, ``not_found`` when there is no such proposal)."""

    id: str
    ok: bool
    memory: MemoryOut | None = None
    error: ErrorDetail | None = None


class BulkReviewResponse(ResponseModel):
    """``POST /v1/review/bulk``: one result per id, in the order sent."""

    results: list[BulkReviewResult]


# --- personas and team settings ------------------------------------------------------------
class RetentionSettingsOut(ResponseModel):
    archive_after_days: int | None = None
    delete_archived_after_days: int | None = None


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
    updated_at: EpochMs | None = None


class PersonaListResponse(ResponseModel):
    """``GET /v1/personas``: the personas configured in the caller's team, by id."""

    personas: list[PersonaResponse]


class TeamSettingsResponse(ResponseModel):
    team_id: str
    memory_enabled: bool
    retention: RetentionSettingsOut = Field(default_factory=RetentionSettingsOut)
    updated_at: EpochMs | None = None


# --- the caller's data ---------------------------------------------------------------------
class ObservationOut(ResponseModel):
    id: str
    identity_id: str
    type: ObservationTypeOut
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
    memories: int = Field(default=0, description="Memories deleted, every scope.")
    persona_memories: int = Field(
        default=0, description="Of which persona memories learnt from the user's transcripts."
    )
    review_actions: int = Field(
        default=0, description="Audit rows about those memories (they hold copies of them)."
    )
    suppressions: int = Field(
        default=0,
        description="Remembered deletions, archives and rejections of the user's memories.",
    )
    memory_versions: int = Field(
        default=0, description="Recorded versions of those memories (their history)."
    )
    memory_changes: int = Field(
        default=0,
        description="Change proposals learnt from the user's transcripts (new values of "
        "memories, waiting for review or decided).",
    )


class ErasureReceipt(ResponseModel):
    identity_id: str
    user_id: str
    team_id: str
    erased_at: int
    counts: ErasureCounts


# --- team insights -------------------------------------------------------------------------
class ToolInsightOut(ResponseModel):
    tool: str
    users: int = Field(description="Distinct users with an affinity for or an avoidance of it.")
    users_with_affinity: int
    users_with_avoidance: int
    mean_affinity_confidence: float | None = Field(
        description="Mean current confidence of the affinities; null below minUsers of them."
    )
    mean_avoidance_confidence: float | None = Field(
        description="Mean current confidence of the avoidances; null below minUsers of them."
    )


class DomainInsightOut(ResponseModel):
    domain: str
    users: int = Field(description="Distinct users who prefer it.")
    mean_confidence: float


class ToolInsightsResponse(ResponseModel):
    aggregated_at: EpochMs | None = Field(description="When the figures were aggregated (ms).")
    min_users: int = Field(description="A row is shown only with at least this many users.")
    tools: list[ToolInsightOut]


class DomainInsightsResponse(ResponseModel):
    aggregated_at: EpochMs | None = Field(description="When the figures were aggregated (ms).")
    min_users: int = Field(description="A row is shown only with at least this many users.")
    domains: list[DomainInsightOut]


# --- headers -------------------------------------------------------------------------------
IDEMPOTENCY_HEADER = "Idempotency-Key"


__all__ = [
    "IDEMPOTENCY_HEADER",
    "PATH_PARAMETERS",
    "AcceptedResponse",
    "ApproveRequest",
    "BulkReviewRequest",
    "BulkReviewResponse",
    "BulkReviewResult",
    "CurrentOut",
    "DependencyStatus",
    "DomainInsightOut",
    "DomainInsightsResponse",
    "DuplicateOut",
    "ErasureCounts",
    "ErasureReceipt",
    "ErrorBody",
    "ErrorDetail",
    "EventsRequest",
    "ExportResponse",
    "ExtractionConfig",
    "ExtractionSettingsOut",
    "FactOut",
    "FactsResponse",
    "HealthResponse",
    "MemoryActionOut",
    "MemoryGetQuery",
    "MemoryHistoryQuery",
    "MemoryHistoryResponse",
    "MemoryListQuery",
    "MemoryListResponse",
    "MemoryMergeRequest",
    "MemoryOut",
    "MemoryPageResponse",
    "MemoryPatchRequest",
    "MemoryRecallArgs",
    "MemoryRecallQuery",
    "MemoryRestoreRequest",
    "MemorySaveArgs",
    "MemorySaveRequest",
    "MemoryVersionOut",
    "ObservationIn",
    "ObservationOut",
    "ObservationsRequest",
    "PendingChangeOut",
    "PersonaListResponse",
    "PersonaRequest",
    "PersonaResponse",
    "QueryEvent",
    "QueuedResponse",
    "RankedToolOut",
    "RetentionRule",
    "RetentionSettingsOut",
    "ReviewItemOut",
    "ReviewListQuery",
    "ReviewListResponse",
    "SavedMemoryOut",
    "SessionRequest",
    "SessionResponse",
    "SessionSections",
    "TeamSettingsRequest",
    "TeamSettingsResponse",
    "ToolCallQuery",
    "ToolCallRequest",
    "ToolCallResponse",
    "ToolCandidate",
    "ToolDefinition",
    "ToolEvent",
    "ToolInsightOut",
    "ToolInsightsResponse",
    "ToolRankRequest",
    "ToolRankResponse",
    "ToolsQuery",
    "ToolsResponse",
    "TranscriptMessage",
    "TranscriptRequest",
]
