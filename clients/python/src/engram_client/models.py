"""The service's answers as typed models.

Every response body is validated into one of these pydantic models. Fields are attributes in
snake_case (``memory.source_channel_id``); code written against the JSON can also read them
as items under their JSON names (``memory["sourceChannelId"]``). Fields the service adds
later are kept (``model_extra``) rather than refused, so an older client keeps working.

Only the fields a client relies on are declared; the service's OpenAPI document
(``GET /v1/openapi.json``, ``docs/openapi.json``) describes every field.
"""

from __future__ import annotations

from typing import Any

from pydantic import BaseModel, ConfigDict, Field
from pydantic.alias_generators import to_camel


class WireModel(BaseModel):
    """A response body: snake_case attributes, camelCase JSON names, unknown fields kept."""

    model_config = ConfigDict(
        alias_generator=to_camel,
        populate_by_name=True,
        serialize_by_alias=True,
        extra="allow",
        frozen=True,
    )

    def _field_name(self, key: str) -> str | None:
        fields = type(self).model_fields
        if key in fields:
            return key
        for name, info in fields.items():
            if info.alias == key:
                return name
        return None

    def __getitem__(self, key: str) -> Any:
        """The field whose JSON name (or attribute name) is ``key``."""
        name = self._field_name(key)
        if name is not None:
            return getattr(self, name)
        extra = self.model_extra or {}
        if key in extra:
            return extra[key]
        raise KeyError(key)

    def __contains__(self, key: object) -> bool:
        if not isinstance(key, str):
            return False
        return self._field_name(key) is not None or key in (self.model_extra or {})

    def get(self, key: str, default: Any = None) -> Any:
        try:
            return self[key]
        except KeyError:
            return default

    def to_json(self) -> dict[str, Any]:
        """The body as the service sent it (JSON names)."""
        return self.model_dump(mode="json", by_alias=True)


class Health(WireModel):
    status: str
    version: str
    redis: str = "unknown"
    postgres: str = "unknown"


class Accepted(WireModel):
    """202 from an ingest route: every record was durably queued."""

    accepted: int
    ids: list[str]


class Queued(WireModel):
    """202 for a transcript: queued for extraction."""

    conversation_id: str
    messages: int


class Fact(WireModel):
    """A behavioural fact; ``confidence`` is its current (decayed) value."""

    id: str
    category: str
    subject: str
    content: str
    confidence: float
    reinforcement_count: int
    last_reinforced_at: int
    created_at: int
    updated_at: int


class Memory(WireModel):
    id: str
    scope: str
    owner_id: str
    user_id: str | None = None
    key: str
    value: str
    source_channel_id: str | None = None
    confidence: float
    status: str
    created_at: int
    updated_at: int
    version: int = 1


class Duplicate(WireModel):
    """Another memory of the same owner and scope, under another key, whose value is close."""

    id: str
    key: str


class SavedMemory(Memory):
    """``save``'s answer: the memory, and ``duplicate_of`` when the service's embedder flags
    another of the caller's memories as the same fact (``merge_memory`` folds one in)."""

    duplicate_of: Duplicate | None = None


class Current(WireModel):
    """What a change proposal would replace (``value`` None: withheld from the reviewer)."""

    id: str
    version: int
    value: str | None = None


class ReviewItem(Memory):
    """An item of the review queue; with ``current`` a change proposal for that memory."""

    current: Current | None = None
    duplicate_of: Duplicate | None = None


class PendingChange(WireModel):
    """A change proposal about a memory, waiting in the review queue under ``id``."""

    id: str
    value: str
    confidence: float
    created_at: int


class SessionSections(WireModel):
    facts: str
    memories: str


class SessionContext(WireModel):
    """``POST /v1/sessions``: what to put into the system prompt at a session's start."""

    identity_id: str
    persona_id: str | None = None
    facts: list[Fact]
    tool_affinities: dict[str, float]
    memories: list[Memory]
    prompt: str
    sections: SessionSections
    degraded: list[str] = Field(default_factory=list)

    def system_prompt(self, base: str) -> str:
        """``base`` followed by the session's memory prompt (``base`` alone when empty)."""
        return f"{base}\n\n{self.prompt}" if self.prompt.strip() else base

    def rank_tools(self, names: list[str]) -> list[str]:
        """``names`` ordered by the user's affinity, highest first; tools without an
        affinity keep their order after those with one."""
        known = {name: self.tool_affinities[name] for name in names if name in self.tool_affinities}
        ranked = sorted(known, key=lambda name: -known[name])
        return ranked + [name for name in names if name not in known]


class MemoryAction(WireModel):
    """One audit row of a memory's history."""

    id: str
    action: str
    actor_id: str
    at: int
    before: Memory | None = None
    after: Memory | None = None


class MemoryVersion(WireModel):
    """One recorded version of a memory: its key, value and status after a write, who made
    it as what, through what, and while it was current (``valid_to`` None: it still is)."""

    version: int
    key: str
    value: str
    status: str
    actor_id: str
    actor_kind: str
    surface: str
    valid_from: int
    valid_to: int | None = None


class MemoryHistory(WireModel):
    """One page of a memory's versions (oldest first) and its audit trail."""

    memory_id: str
    recorded_from: int | None = None
    versions: list[MemoryVersion]
    actions: list[MemoryAction]
    next_cursor: str | None = None
    pending_change: PendingChange | None = None


class ToolDefinition(WireModel):
    """A tool the service runs for a model (``POST /v1/tools/{name}``)."""

    name: str
    description: str
    input_schema: dict[str, Any]


class ToolResult(WireModel):
    name: str
    result: Any


class RankedTool(WireModel):
    """One candidate of ``rank_tools``: its score, the user's affinity for it (in [-1, 1];
    0 without a fact) and ``boosted_score = score + 2 × affinity``."""

    name: str
    score: float
    affinity: float
    boosted_score: float


class ToolRanking(WireModel):
    """``rank_tools``: the candidates best first; ``degraded`` is ``["behaviour:unavailable"]``
    when the user's facts could not be read (every affinity 0)."""

    tools: list[RankedTool]
    boost_factor: float
    degraded: list[str] = Field(default_factory=list)

    def names(self) -> list[str]:
        return [t.name for t in self.tools]


class ReviewPage(WireModel):
    memories: list[ReviewItem]
    next_cursor: str | None = None


class Persona(WireModel):
    persona_id: str
    team_id: str
    allowed_groups: list[str]
    memory_enabled: bool
    extraction: dict[str, Any]
    retention: dict[str, int | None] = Field(default_factory=dict)


class TeamSettings(WireModel):
    team_id: str
    memory_enabled: bool
    retention: dict[str, int | None] = Field(default_factory=dict)


class Export(WireModel):
    """Everything the service holds about the caller."""

    identity_id: str
    user_id: str
    team_id: str
    exported_at: int
    observations: list[dict[str, Any]]
    facts: list[Fact]
    memories: list[Memory]


class ErasureReceipt(WireModel):
    identity_id: str
    user_id: str
    team_id: str
    erased_at: int
    counts: dict[str, int]
