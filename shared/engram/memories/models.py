"""Memory, persona and team-settings models (pydantic v2, camelCase JSON)."""

from __future__ import annotations

from datetime import datetime
from enum import StrEnum
from typing import Any, Literal

from pydantic import BaseModel, ConfigDict, Field
from pydantic.alias_generators import to_camel

from engram import limits

KEY_MAX = limits.MAX_KEY_CHARS
VALUE_MAX = limits.MAX_VALUE_CHARS
ID_MAX = limits.MAX_ID_CHARS


class Scope(StrEnum):
    USER = "user"
    PERSONA = "persona"
    PERSONA_USER = "persona_user"


# Higher wins when the same key is visible in several scopes.
SCOPE_PRIORITY: dict[Scope, int] = {Scope.PERSONA_USER: 3, Scope.PERSONA: 2, Scope.USER: 1}


class Status(StrEnum):
    ACTIVE = "active"
    PENDING_REVIEW = "pending_review"
    ARCHIVED = "archived"
    REJECTED = "rejected"


#: Statuses of a key's live row, counted by quotas. A key (team, scope, owner, user, key) has
#: one row. A rejected row counts toward no quota and stays until erasure or until a new
#: value of its key is saved or proposed: that write replaces it, and the rejected value
#: stays refused by the suppression its rejection recorded.
LIVE_STATUSES = frozenset({Status.ACTIVE, Status.PENDING_REVIEW, Status.ARCHIVED})
#: Statuses of a proposal (waiting for review, or turned down): what team admins manage of a
#: user's own ``user`` memories. Approved, a ``user`` memory is its owner's alone.
PROPOSAL_STATUSES = frozenset({Status.PENDING_REVIEW, Status.REJECTED})


class CamelModel(BaseModel):
    model_config = ConfigDict(alias_generator=to_camel, populate_by_name=True, frozen=True)

    def to_json_dict(self) -> dict[str, Any]:
        return self.model_dump(mode="json", by_alias=True)


class RetentionRules(CamelModel):
    """Memory retention of a team or a persona: archive active memories untouched for
    ``archive_after_days``; hard-delete archived ones untouched for
    ``delete_archived_after_days``. ``None``: no such rule."""

    archive_after_days: int | None = None
    delete_archived_after_days: int | None = None


class ExtractionSettings(CamelModel):
    """A persona's background extraction: on or off, and its prompt."""

    enabled: bool = False
    prompt: str | None = None


class Memory(CamelModel):
    """One explicit memory as stored. ``team_id`` is internal; it is never part of the JSON.
    Ids are not length-checked here: what was stored is read back as it is (writes go
    through ``NewMemory``)."""

    id: str = Field(min_length=1)
    scope: Scope
    owner_id: str = Field(min_length=1)
    user_id: str | None = None
    team_id: str = Field(min_length=1, exclude=True)
    key: str = Field(min_length=1, max_length=KEY_MAX)
    value: str = Field(min_length=1, max_length=VALUE_MAX)
    source_channel_id: str | None = None
    confidence: float = Field(default=1.0, ge=0.0, le=1.0)
    status: Status = Status.ACTIVE
    created_at: datetime
    updated_at: datetime
    #: one more with every change of the row (its ``ETag``; ``If-Match`` compares it)
    version: int = Field(default=1, ge=1)
    #: the user whose transcript it was learnt from (proposals); internal, never in the JSON
    source_user_id: str | None = Field(default=None, exclude=True)

    def internal_fields(self) -> dict[str, Any]:
        """Every field, the internal ones included (for a copy with changes)."""
        return {**self.model_dump(), "team_id": self.team_id, "source_user_id": self.source_user_id}


class NewMemory(CamelModel):
    """What a writer hands to ``engram.memories.writes`` (id and timestamps come from the store)."""

    scope: Scope
    owner_id: str = Field(min_length=1, max_length=ID_MAX)
    user_id: str | None = Field(default=None, max_length=ID_MAX)
    team_id: str = Field(min_length=1, max_length=ID_MAX)
    key: str = Field(min_length=1, max_length=KEY_MAX)
    value: str = Field(min_length=1, max_length=VALUE_MAX)
    source_channel_id: str | None = Field(default=None, max_length=ID_MAX)
    confidence: float = Field(default=1.0, ge=0.0, le=1.0)
    status: Status = Status.ACTIVE
    embedding: list[float] | None = Field(default=None, exclude=True)
    #: the embedder ``embedding`` came from (``Embedder.model_id``); None: not embedded yet
    embedding_model: str | None = Field(default=None, exclude=True)
    source_user_id: str | None = Field(default=None, max_length=ID_MAX, exclude=True)


class MemoryFilter(CamelModel):
    """Filters of ``MemoryTx.list_memories``; every field narrows, ``None`` means any."""

    team_id: str
    scope: Scope | None = None
    owner_id: str | None = None
    user_id: str | None = None
    status: Status | None = None
    persona_id: str | None = None  # persona and persona_user rows of this persona
    source_user_id: str | None = None  # rows learnt from this user's transcripts
    source_channel_id: str | None = None  # rows learnt or saved in this conversation
    #: an admin's listing: ``user`` rows of other owners only while they are proposals
    #: (pending or rejected); a user's own ``user`` memories are theirs alone
    managed_by: str | None = None
    #: a user's listing: ``persona`` rows only once reviewed, unless learnt from this user
    #: (another user's conversation is not shown to them before an admin approved it)
    member: str | None = None
    #: personas whose shared ``persona`` rows are left out (closed to the caller); the caller's
    #: own ``persona_user`` rows are always listed, as export and erasure cover them
    exclude_personas: tuple[str, ...] = ()
    updated_after: datetime | None = None
    updated_before: datetime | None = None
    limit: int = Field(default=50, ge=1, le=1000)
    cursor: str | None = None


class MemoryPage(CamelModel):
    memories: list[Memory]
    next_cursor: str | None = None


class RecallTuning(CamelModel):
    """How one embedder's vector list enters a hybrid recall (each embedder has its own: the
    spread of cosine similarities differs from model to model).

    A memory is in the vector list when its cosine similarity to the query is at least
    ``min_similarity``. ``fusion``:

    - ``rrf``: ``keyword_weight / (rrf_k + rank)`` in the keyword list plus
      ``vector_weight / (rrf_k + rank)`` in the vector list (weighted reciprocal rank fusion,
      1-based ranks);
    - ``score``: ``keyword_weight * score / best score`` in the keyword list plus
      ``vector_weight * max(cosine, 0)`` in the vector list (weighted score fusion; the keyword
      score divided by the query's best one, so both parts lie in 0..1).
    """

    fusion: Literal["rrf", "score"] = "rrf"
    min_similarity: float = Field(default=0.25, ge=-1.0, le=1.0)
    rrf_k: int = Field(default=60, ge=1)
    keyword_weight: float = Field(default=1.0, ge=0.0)
    vector_weight: float = Field(default=1.0, ge=0.0)
    #: the cosine similarity from which a memory under another key of the same owner and
    #: scope is flagged as a possible duplicate (measured per embedder: bench_duplicates);
    #: None: this embedder does not flag duplicates
    duplicate_similarity: float | None = Field(default=None, ge=-1.0, le=1.0)


class RecallRequest(CamelModel):
    team_id: str
    user_id: str
    persona_id: str | None = None
    query: str = ""
    limit: int = Field(default=limits.DEFAULT_RECALL_RESULTS, ge=1, le=limits.MAX_RECALL_RESULTS)
    embedding: list[float] | None = None
    #: vectors are compared only with vectors of the same embedder
    embedding_model: str | None = None
    tuning: RecallTuning = Field(default_factory=RecallTuning)


class Persona(CamelModel):
    """A persona's memory settings. ``allowed_groups`` empty: every user of the team."""

    persona_id: str = Field(min_length=1)
    team_id: str = Field(min_length=1, exclude=True)
    allowed_groups: list[str] = Field(default_factory=list)
    memory_enabled: bool = True
    extraction: ExtractionSettings = Field(default_factory=ExtractionSettings)
    retention: RetentionRules = Field(default_factory=RetentionRules)
    updated_at: datetime | None = None

    def allows(self, groups: frozenset[str]) -> bool:
        return not self.allowed_groups or bool(groups.intersection(self.allowed_groups))


class TeamSettings(CamelModel):
    team_id: str = Field(exclude=True)
    memory_enabled: bool = True
    retention: RetentionRules = Field(default_factory=RetentionRules)
    updated_at: datetime | None = None


class ReviewAction(CamelModel):
    """One audit row of the review pipeline and user edits."""

    id: str
    team_id: str = Field(exclude=True)
    memory_id: str
    actor_id: str
    action: str
    before: dict[str, Any] | None = None
    after: dict[str, Any] | None = None
    at: datetime
    #: the user the row is about (its memory's user, or the user it was learnt from); internal
    about_user_id: str | None = Field(default=None, exclude=True)


#: ``ReviewAction.actor_id`` of audit rows whose actor was erased (``MemoryTx.erase_user``)
ERASED_ACTOR = "erased"


def audit_is_about(action: ReviewAction, user_id: str) -> bool:
    """Whether an audit row is about a memory of ``user_id`` (its ``user`` memory, or its
    ``persona_user`` memory), judged from the before/after copies it holds."""
    for copy in (action.before, action.after):
        if copy is None:
            continue
        scope = copy.get("scope")
        if (scope == Scope.USER.value and copy.get("ownerId") == user_id) or (
            scope == Scope.PERSONA_USER.value and copy.get("userId") == user_id
        ):
            return True
    return False


class ToolResult(CamelModel):
    """What a tool call returns to the model: compact ``text`` plus structured data."""

    name: str
    ok: bool
    text: str
    memories: list[Memory] = Field(default_factory=list)
    created: bool | None = None
    error: dict[str, Any] | None = None
