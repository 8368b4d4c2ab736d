"""What a client sends to explicit memories: one validation model per input, each mapped to
its domain command (``engram.memories.commands``) by its ``command()``, here and nowhere else.

The HTTP routes validate these models (``engram.api.http.parse_body``); the services take the
commands as they are: a service never re-checks a value a model already checked. The tool
arguments a model sends (``memory_save`` / ``memory_recall``) are models too: they map to the
same commands an HTTP body does, and the tool definitions' JSON Schemas are generated from
them (``engram.api.tools``).
"""

from __future__ import annotations

from typing import Annotated, Any, Literal

from pydantic import BaseModel, ConfigDict, Field, model_validator

from engram import limits
from engram.fields import (
    WHOLE,
    Confidence,
    Identifier,
    InputModel,
    MemoryKey,
    MemoryValue,
    Name,
    PromptText,
    QueryInput,
    QueryText,
    field_error,
)
from engram.memories.commands import (
    Approve,
    BulkReview,
    EditMemory,
    ListMemories,
    ListPending,
    PutPersona,
    PutTeamSettings,
    Recall,
    ReviewDecision,
    SaveMemory,
)
from engram.memories.cursors import Cursor
from engram.memories.models import ExtractionSettings, RetentionRules, Scope, Status

MemoryScope = Literal["user", "persona", "persona_user"]
MemoryStatusName = Literal["active", "pending_review", "archived", "rejected"]
#: scopes that live under a persona, so a save in them names one
PERSONA_SCOPES = ("persona", "persona_user")
RetentionDays = Annotated[int, Field(ge=1, le=limits.MAX_RETENTION_DAYS), WHOLE]
RecallLimit = Annotated[int, Field(ge=1, le=limits.MAX_RECALL_RESULTS), WHOLE]
#: a past moment, epoch milliseconds (one in the future is refused by the service)
AsOf = Annotated[
    int,
    Field(
        ge=0,
        description="What was current at this moment (epoch ms, not in the future), not now.",
    ),
    WHOLE,
]
#: a version number of a memory
VersionNumber = Annotated[int, Field(ge=1), WHOLE]
PageLimit = Annotated[int, Field(ge=1, le=limits.MAX_PAGE), WHOLE]


def _persona_scopes_need_a_persona(schema: dict[str, Any]) -> None:
    schema["allOf"] = [
        {
            "if": {
                "properties": {"scope": {"enum": list(PERSONA_SCOPES)}},
                "required": ["scope"],
            },
            "then": {"properties": {"personaId": {"type": "string"}}, "required": ["personaId"]},
        }
    ]


class MemorySaveRequest(InputModel):
    """``POST /v1/memories`` (memory_save): 201 when new, 200 when the same key was updated.
    ``scope`` ``persona`` or ``persona_user`` needs a ``personaId``."""

    model_config = ConfigDict(json_schema_extra=_persona_scopes_need_a_persona)

    key: MemoryKey
    value: MemoryValue
    confidence: Confidence | None = None
    persona_id: Identifier | None = None
    source_channel_id: Identifier | None = None
    scope: MemoryScope | None = None

    @model_validator(mode="after")
    def _persona_for_scope(self) -> MemorySaveRequest:
        if self.persona_id is None and self.scope in PERSONA_SCOPES:
            raise field_error(
                "MemorySaveRequest",
                "personaId",
                "persona_required",
                "scope {scope} needs a personaId",
                scope=self.scope,
            )
        return self

    def command(self) -> SaveMemory:
        return SaveMemory(
            key=self.key,
            value=self.value,
            confidence=1.0 if self.confidence is None else self.confidence,
            persona_id=self.persona_id,
            source_channel_id=self.source_channel_id,
            scope=None if self.scope is None else Scope(self.scope),
        )


def _at_least_one(*names: str) -> Any:
    def extra(schema: dict[str, Any]) -> None:
        props = schema.get("properties", {})
        schema["anyOf"] = [
            {
                "properties": {n: dict(props[n]["anyOf"][0])},
                "required": [n],
            }
            for n in names
        ]

    return extra


class MemoryPatchRequest(InputModel):
    """``PATCH /v1/memories/{id}``: at least one of key, value, confidence."""

    model_config = ConfigDict(json_schema_extra=_at_least_one("key", "value", "confidence"))

    key: MemoryKey | None = None
    value: MemoryValue | None = None
    confidence: Confidence | None = None

    @model_validator(mode="after")
    def _not_empty(self) -> MemoryPatchRequest:
        if self.key is None and self.value is None and self.confidence is None:
            raise ValueError("at least one of key, value, confidence is required")
        return self

    def command(self) -> EditMemory:
        return EditMemory(key=self.key, value=self.value, confidence=self.confidence)


class ApproveRequest(InputModel):
    """``POST /v1/review/{id}/approve``: optional edits applied before approving (no body, or
    ``{}``, approves as proposed)."""

    key: MemoryKey | None = None
    value: MemoryValue | None = None

    def command(self) -> Approve:
        return Approve(key=self.key, value=self.value)


class MemoryRecallQuery(QueryInput):
    """``GET /v1/memories?query=&maxResults=&personaId=`` (memory_recall)."""

    query: QueryText | None = None
    max_results: RecallLimit = limits.DEFAULT_RECALL_RESULTS
    persona_id: Identifier | None = None
    as_of: AsOf | None = None

    def command(self) -> Recall:
        return Recall(
            query=self.query or "",
            max_results=self.max_results,
            persona_id=self.persona_id,
            as_of_ms=self.as_of,
        )


class MemoryGetQuery(QueryInput):
    """``GET /v1/memories/{id}?asOf=``: the memory now, or as it was at ``asOf``."""

    as_of: AsOf | None = None


class MemoryHistoryQuery(QueryInput):
    """``GET /v1/memories/{id}/history?limit=&cursor=``: one page of versions, oldest first."""

    limit: PageLimit = limits.DEFAULT_PAGE
    cursor: Annotated[str, Field(pattern=r"^[0-9]{1,18}$", max_length=18)] | None = Field(
        default=None, description="The nextCursor of the page before."
    )

    @property
    def after(self) -> int:
        """The last version of the page before (0: from the first)."""
        return 0 if self.cursor is None else int(self.cursor)


class MemoryRestoreRequest(InputModel):
    """``POST /v1/memories/{id}/restore``: make version ``version``'s key and value current,
    as a new version (a deleted memory comes back, active)."""

    version: VersionNumber


class MemoryMergeRequest(InputModel):
    """``POST /v1/memories/{id}/merge``: fold memory ``{id}`` into ``into`` (the same owner
    and scope): its versions become ``into``'s earliest, ``{id}`` is removed, and the answer
    is ``into`` as it now is."""

    into: Identifier


class ReviewListQuery(QueryInput):
    """``GET /v1/review?personaId=&limit=&cursor=``: one page of pending memories, oldest
    first; pass ``nextCursor`` back as ``cursor`` for the next page."""

    persona_id: Identifier | None = None
    limit: PageLimit = limits.DEFAULT_PAGE
    cursor: Cursor | None = None

    def command(self) -> ListPending:
        return ListPending(persona_id=self.persona_id, limit=self.limit, cursor=self.cursor)


class MemoryListQuery(QueryInput):
    """``GET /v1/memories/list?scope=&status=&personaId=&sourceChannelId=&limit=&cursor=``:
    one page of the memories visible to the caller, newest first; every parameter narrows.
    Pass ``nextCursor`` back as ``cursor`` (with the same filters) for the next page."""

    scope: MemoryScope | None = None
    status: MemoryStatusName | None = None
    persona_id: Identifier | None = None
    source_channel_id: Identifier | None = Field(
        default=None, description="Only the memories of this conversation (their provenance)."
    )
    limit: PageLimit = limits.DEFAULT_PAGE
    cursor: Cursor | None = None

    def command(self) -> ListMemories:
        return ListMemories(
            scope=None if self.scope is None else Scope(self.scope),
            status=None if self.status is None else Status(self.status),
            persona_id=self.persona_id,
            source_channel_id=self.source_channel_id,
            limit=self.limit,
            cursor=self.cursor,
        )


class BulkReviewRequest(InputModel):
    """``POST /v1/review/bulk`` (admins): approve or reject each of ``ids``, one by one; each
    decision is atomic and audited as a single approval or rejection is."""

    action: ReviewDecision
    ids: list[Identifier] = Field(
        min_length=1, max_length=limits.MAX_BULK_REVIEW_IDS, json_schema_extra={"uniqueItems": True}
    )

    @model_validator(mode="after")
    def _distinct(self) -> BulkReviewRequest:
        if len(set(self.ids)) != len(self.ids):
            raise field_error(
                "BulkReviewRequest", "ids", "duplicate_id", "each id may appear only once"
            )
        return self

    def command(self) -> BulkReview:
        return BulkReview(action=self.action, ids=tuple(self.ids))


# --- personas and team settings ------------------------------------------------------------
class RetentionRule(InputModel):
    """Memory retention of a team or a persona: archive active memories untouched for
    ``archive_after_days``; hard-delete archived ones untouched for
    ``delete_archived_after_days``. ``None`` (or left out): no such rule."""

    archive_after_days: RetentionDays | None = Field(
        default=None, description="Archive active memories not updated for this many days."
    )
    delete_archived_after_days: RetentionDays | None = Field(
        default=None, description="Hard-delete archived memories not updated for this many days."
    )

    def policy(self) -> RetentionRules:
        return RetentionRules(
            archive_after_days=self.archive_after_days,
            delete_archived_after_days=self.delete_archived_after_days,
        )


class ExtractionConfig(InputModel):
    """A persona's background extraction: on or off, and its prompt (Bedrock extractor)."""

    enabled: bool = False
    prompt: PromptText | None = None

    def settings(self) -> ExtractionSettings:
        return ExtractionSettings(enabled=self.enabled, prompt=self.prompt)


def _retention_given(model: PersonaRequest | TeamSettingsRequest) -> RetentionRules | None:
    """``retention`` as a command takes it: left out, ``None`` (keep the current rules);
    ``null``, no rules."""
    if "retention" not in model.model_fields_set:
        return None
    return model.retention.policy() if model.retention is not None else RetentionRules()


class PersonaRequest(InputModel):
    """``PUT /v1/personas/{personaId}`` (admins). ``retention`` left out keeps the persona's
    retention rules; ``null`` removes them."""

    allowed_groups: list[Name] = Field(default_factory=list, max_length=limits.MAX_GROUPS)
    memory_enabled: bool = True
    extraction: ExtractionConfig = Field(default_factory=ExtractionConfig)
    retention: RetentionRule | None = None

    def command(self, persona_id: str) -> PutPersona:
        return PutPersona(
            persona_id=persona_id,
            allowed_groups=tuple(self.allowed_groups),
            memory_enabled=self.memory_enabled,
            extraction=self.extraction.settings(),
            retention=_retention_given(self),
        )


class TeamSettingsRequest(InputModel):
    """``PUT /v1/settings/team`` (team admins). ``retention`` left out keeps the team's
    retention rules; ``null`` removes them."""

    memory_enabled: bool
    retention: RetentionRule | None = None

    def command(self) -> PutTeamSettings:
        return PutTeamSettings(memory_enabled=self.memory_enabled, retention=_retention_given(self))


# --- tool arguments, as a model sends them (snake_case) --------------------------------------
class _ToolArguments(BaseModel):
    model_config = ConfigDict(extra="forbid", strict=True, frozen=True)


class MemorySaveArgs(_ToolArguments):
    """Arguments of the ``memory_save`` tool."""

    key: MemoryKey = Field(description="A short label of 2-6 words, e.g. 'preferred language'.")
    value: MemoryValue = Field(description="The fact or detail to remember.")
    confidence: Confidence = Field(default=1.0, description="How sure you are, 0-1 (default 1).")

    def command(self, persona_id: str | None, source_channel_id: str | None) -> SaveMemory:
        """The same command ``POST /v1/memories`` makes of a body with these values."""
        return SaveMemory(
            key=self.key,
            value=self.value,
            confidence=self.confidence,
            persona_id=persona_id,
            source_channel_id=source_channel_id,
        )


class MemoryRecallArgs(_ToolArguments):
    """Arguments of the ``memory_recall`` tool."""

    query: QueryText = Field(default="", description="Words to search for (optional).")
    max_results: RecallLimit = Field(
        default=limits.DEFAULT_RECALL_RESULTS,
        description=f"At most this many memories (default {limits.DEFAULT_RECALL_RESULTS}).",
    )

    def command(self, persona_id: str | None) -> Recall:
        """The same command ``GET /v1/memories`` makes of a query with these values."""
        return Recall(query=self.query, max_results=self.max_results, persona_id=persona_id)
