"""What a caller asks of explicit memories, one frozen command per request.

The edge (``engram.api``: an HTTP body, a query string, a model's tool arguments) validates
its input and maps it to one of these, once; the services take them as they are and never
check again what the edge checked. Values are domain types, snake_case.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Literal

from engram import limits
from engram.memories.models import ExtractionSettings, RetentionRules, Scope, Status

__all__ = [
    "Approve",
    "BulkReview",
    "EditMemory",
    "ListMemories",
    "ListPending",
    "PutPersona",
    "PutTeamSettings",
    "Recall",
    "ReviewDecision",
    "SaveMemory",
]

ReviewDecision = Literal["approve", "reject"]


@dataclass(frozen=True, slots=True)
class SaveMemory:
    """Create or update (same scope, owner, user and key) an active memory. ``scope`` None:
    ``persona_user`` with a persona, else ``user``."""

    key: str
    value: str
    confidence: float = 1.0
    persona_id: str | None = None
    source_channel_id: str | None = None
    scope: Scope | None = None


@dataclass(frozen=True, slots=True)
class Recall:
    """Scope-merged recall of the memories that best match ``query`` (``""``: the most
    confident, most recent)."""

    query: str = ""
    max_results: int = limits.DEFAULT_RECALL_RESULTS
    persona_id: str | None = None
    #: what was current then (epoch ms), not now
    as_of_ms: int | None = None


@dataclass(frozen=True, slots=True)
class EditMemory:
    """A person's edit of one memory: each given value replaces the memory's."""

    key: str | None = None
    value: str | None = None
    confidence: float | None = None


@dataclass(frozen=True, slots=True)
class ListMemories:
    """One page of the memories visible to the caller; every filter given narrows."""

    scope: Scope | None = None
    status: Status | None = None
    persona_id: str | None = None
    source_channel_id: str | None = None
    limit: int = limits.DEFAULT_PAGE
    cursor: str | None = None


@dataclass(frozen=True, slots=True)
class ListPending:
    """One page of the team's pending memories (team admins), oldest first."""

    persona_id: str | None = None
    limit: int = limits.DEFAULT_PAGE
    cursor: str | None = None


@dataclass(frozen=True, slots=True)
class Approve:
    """Approve one proposal, first giving it ``key`` and/or ``value`` when set."""

    key: str | None = None
    value: str | None = None


@dataclass(frozen=True, slots=True)
class BulkReview:
    """Approve or reject each of ``ids`` (distinct), one by one."""

    action: ReviewDecision
    ids: tuple[str, ...]


@dataclass(frozen=True, slots=True)
class PutPersona:
    """Configure one persona of the caller's team. ``retention`` None keeps the persona's
    rules; ``RetentionRules()`` removes them."""

    persona_id: str
    allowed_groups: tuple[str, ...] = ()
    memory_enabled: bool = True
    extraction: ExtractionSettings = field(default_factory=ExtractionSettings)
    retention: RetentionRules | None = None


@dataclass(frozen=True, slots=True)
class PutTeamSettings:
    """The team's memory switch and retention. ``retention`` None keeps the team's rules;
    ``RetentionRules()`` removes them."""

    memory_enabled: bool
    retention: RetentionRules | None = None
