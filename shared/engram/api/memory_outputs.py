"""The response models of explicit memories: one memory, listings, and a memory's history
(re-exported by ``engram.api.models``, with every other model of the API)."""

from __future__ import annotations

from typing import Literal

from pydantic import Field

from engram.api.memory_inputs import MemoryScope
from engram.api.responses import EpochMs, ResponseModel
from engram.memories.versions import ActorKind, VersionStatus

MemoryStatus = Literal["active", "pending_review", "archived", "rejected"]


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
    created_at: EpochMs
    updated_at: EpochMs
    version: int = Field(
        description="One more with every change of the memory. The memory's `ETag` is this "
        'number in quotes (`"3"`); send it as `If-Match` to edit only what you read.'
    )


class CurrentOut(ResponseModel):
    """What a change proposal would replace: the memory's id, its version now, and its value
    (``null`` for a reviewer who may not read it: a user's own ``user`` memory is theirs)."""

    id: str
    version: int
    value: str | None = None


class DuplicateOut(ResponseModel):
    """Another memory of the same owner and scope, under another key, whose value is close
    to this one's (an embedder must be on): ``POST /v1/memories/{id}/merge`` folds one into
    the other."""

    id: str
    key: str


class PendingChangeOut(ResponseModel):
    """A change proposal about a memory: its id in the review queue and the proposed value."""

    id: str
    value: str
    confidence: float
    created_at: EpochMs


class SavedMemoryOut(MemoryOut):
    """``POST /v1/memories``: the memory saved; ``duplicateOf`` names another of the caller's
    memories, under another key, whose value is close (an embedder that flags duplicates must
    be on): ``POST /v1/memories/{id}/merge`` folds one into the other."""

    duplicate_of: DuplicateOut | None = None


class ReviewItemOut(MemoryOut):
    """A pending proposal; with ``current`` a change proposal: the new value ``value`` for the
    active memory ``current.id`` (approve makes it that memory's next version, under its id)."""

    current: CurrentOut | None = None
    duplicate_of: DuplicateOut | None = None


class MemoryListResponse(ResponseModel):
    memories: list[MemoryOut]


class MemoryPageResponse(ResponseModel):
    """One page of a listing; ``nextCursor`` is ``null`` on the last page."""

    memories: list[MemoryOut]
    next_cursor: str | None = None


class MemoryActionOut(ResponseModel):
    """One audit row: who (``actorId``; ``erased`` once that user was erased) did what
    (``approve``, ``reject``, ``update``, ``delete``) when, with the memory before and after."""

    id: str
    action: str
    actor_id: str
    at: EpochMs
    before: MemoryOut | None = None
    after: MemoryOut | None = None


class MemoryVersionOut(ResponseModel):
    """One recorded version of a memory: its key, value and status after a write, who made
    it (``actorId``; ``erased`` once that user was erased) as what (``actorKind``), through
    what (``surface``), and while it was current (``validTo`` null: it still is)."""

    version: int
    key: str
    value: str
    status: VersionStatus
    actor_id: str
    actor_kind: ActorKind
    surface: str = Field(description="api, mcp, console, extraction, maintenance or tool:<format>")
    valid_from: EpochMs
    valid_to: EpochMs | None = None


class MemoryHistoryResponse(ResponseModel):
    """``GET /v1/memories/{id}/history``: one page of versions, oldest first (pass
    ``nextCursor`` back as ``cursor`` for the next; ``null`` on the last page), and the
    whole audit trail, oldest first. ``recordedFrom``: the first version recorded (the
    versions before it were written before versions were kept); null when none is."""

    memory_id: str
    recorded_from: int | None = None
    versions: list[MemoryVersionOut]
    actions: list[MemoryActionOut]
    next_cursor: str | None = None
    pending_change: PendingChangeOut | None = Field(
        default=None,
        description="A value the extraction job learnt for this memory, waiting in the review "
        "queue under its own id (`POST /v1/review/{id}/approve` makes it this memory's next "
        "version).",
    )
