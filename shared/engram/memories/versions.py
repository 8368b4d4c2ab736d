"""Every write a version: what a memory said, who changed it, through what, and when.

A *version* is one state of a memory's key, value and status. A write that changes any of
them — creation, an overwrite by a save or a proposal, an edit, an archive, a review
decision, retention, a restore, a deletion — records the next version, numbered as the
memory's own ``version`` (its ``ETag``), in the unit of work of the write. A version is
current from ``valid_from`` until the next one's ``valid_from`` (``valid_to``; ``None``
while it is current). A deletion is a version too (status ``deleted``): the memory's history
outlives it, so a deleted memory can be restored; erasure removes the history with the rows.
A change of confidence alone, or a save of the key and value the memory already holds, is
no new version.
"""

from __future__ import annotations

from dataclasses import dataclass
from datetime import datetime
from typing import Literal

from pydantic import Field

from engram.events.models import SERVICE_ACTOR
from engram.memories.access import AccessContext
from engram.memories.models import CamelModel, Memory, Scope, Status

ActorKind = Literal["user", "admin", "service", "extraction", "maintenance"]
#: a version's status: the memory's, or ``deleted`` once it was deleted
VersionStatus = Literal["active", "pending_review", "archived", "rejected", "deleted"]
DELETED: VersionStatus = "deleted"


@dataclass(frozen=True, slots=True)
class Actor:
    """Who made a change (``id``: a user, or ``engram-system``), as what, through what."""

    id: str
    kind: ActorKind
    surface: str


#: the extraction job's proposals
EXTRACTION = Actor(SERVICE_ACTOR, "extraction", "extraction")
#: retention and the other maintenance jobs
MAINTENANCE = Actor(SERVICE_ACTOR, "maintenance", "maintenance")


def actor_of(ctx: AccessContext, memory: Memory) -> Actor:
    """The person ``ctx`` acts for: ``admin`` when they change a memory that is not theirs."""
    own = memory.user_id if memory.scope is Scope.PERSONA_USER else memory.owner_id
    mine = memory.scope is not Scope.PERSONA and own == ctx.user_id
    kind: ActorKind = "admin" if ctx.elevated and not mine else "user"
    return Actor(ctx.user_id, kind, ctx.surface)


def service_actor(ctx: AccessContext) -> Actor:
    """The service acting on its own inside a person's request (a rejected row giving way)."""
    return Actor(SERVICE_ACTOR, "service", ctx.surface)


def is_new_version(before: Memory | None, after: Memory) -> bool:
    """Whether ``after`` is a new version of ``before`` (None: created)."""
    return before is None or (before.key, before.value, before.status) != (
        after.key,
        after.value,
        after.status,
    )


def bumps(before: Memory, key: str, value: str, status: Status, confidence: float) -> bool:
    """Whether a write moves the memory's ``version`` (its ETag): a new version, or a new
    confidence."""
    return (before.key, before.value, before.status, before.confidence) != (
        key,
        value,
        status,
        confidence,
    )


class MemoryVersion(CamelModel):
    """One recorded version of a memory. ``team_id`` and the owner fields are internal:
    they decide who may read it once the memory is gone."""

    memory_id: str
    version: int = Field(ge=1)
    key: str
    value: str
    status: VersionStatus
    actor_id: str
    actor_kind: ActorKind
    surface: str
    valid_from: datetime
    valid_to: datetime | None = None
    team_id: str = Field(exclude=True)
    scope: Scope = Field(exclude=True)
    owner_id: str = Field(exclude=True)
    user_id: str | None = Field(default=None, exclude=True)
    source_user_id: str | None = Field(default=None, exclude=True)
    created_at: datetime = Field(exclude=True)

    def as_memory(self) -> Memory:
        """The memory as this version left it (a deleted one: as it was before deletion)."""
        status = Status.ARCHIVED if self.status == DELETED else Status(self.status)
        return Memory(
            id=self.memory_id,
            scope=self.scope,
            owner_id=self.owner_id,
            user_id=self.user_id,
            team_id=self.team_id,
            key=self.key,
            value=self.value,
            status=status,
            created_at=self.created_at,
            updated_at=self.valid_from,
            version=self.version,
            source_user_id=self.source_user_id,
        )


def version_of(
    memory: Memory, actor: Actor, at: datetime, *, deleted: bool = False
) -> MemoryVersion:
    """The version ``memory`` (as written) records; ``deleted``: its deletion, one past it."""
    return MemoryVersion(
        memory_id=memory.id,
        version=memory.version + 1 if deleted else memory.version,
        key=memory.key,
        value=memory.value,
        status=DELETED if deleted else memory.status.value,
        actor_id=actor.id,
        actor_kind=actor.kind,
        surface=actor.surface,
        valid_from=at,
        team_id=memory.team_id,
        scope=memory.scope,
        owner_id=memory.owner_id,
        user_id=memory.user_id,
        source_user_id=memory.source_user_id,
        created_at=memory.created_at,
    )


@dataclass(frozen=True, slots=True)
class VersionPage:
    """Versions of one memory, oldest first; ``recorded_from``: the first version recorded
    (None: none); ``next_after``: the last version of this page when more follow."""

    versions: list[MemoryVersion]
    recorded_from: int | None
    next_after: int | None


__all__ = [
    "DELETED",
    "EXTRACTION",
    "MAINTENANCE",
    "Actor",
    "ActorKind",
    "MemoryVersion",
    "VersionPage",
    "VersionStatus",
    "actor_of",
    "bumps",
    "is_new_version",
    "service_actor",
    "version_of",
]
