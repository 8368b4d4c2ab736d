"""Change proposals: a value the extraction job learnt for a key whose memory is active with
another value. The change is stored beside the memory (it never replaces it) and waits for a
reviewer: approving makes its value the memory's next version under the same id; rejecting
keeps the memory as it is and refuses that value for the key from then on.

A memory has at most one pending change: a newer value learnt for it replaces the pending
one. Decided changes stay (approved or rejected) until their memory is deleted, so the loser
of two concurrent decisions is told the change was already reviewed.
"""

from __future__ import annotations

from dataclasses import dataclass
from datetime import datetime
from enum import StrEnum

from engram.memories.models import CamelModel, Memory, Status


class ChangeStatus(StrEnum):
    PENDING = "pending"
    APPROVED = "approved"
    REJECTED = "rejected"


class ChangeProposal(CamelModel):
    """One proposed value for the memory ``memory_id`` (internal: the API shows it as a
    review item, ``as_proposal``)."""

    id: str
    team_id: str
    memory_id: str
    value: str
    confidence: float
    source_user_id: str | None = None
    source_channel_id: str | None = None
    status: ChangeStatus = ChangeStatus.PENDING
    created_at: datetime
    updated_at: datetime


@dataclass(frozen=True)
class Current:
    """What a change would replace: the memory's id, version and value (``None`` when the
    reviewer may not read it: a user's own ``user`` memory is theirs alone)."""

    id: str
    version: int
    value: str | None


@dataclass(frozen=True)
class Duplicate:
    """Another memory of the same owner and scope whose value is close to this one's."""

    id: str
    key: str


@dataclass(frozen=True)
class ReviewItem:
    """One item of the review queue: a pending proposal, or a change (``current`` set) shown
    as the proposal it is (``as_proposal``)."""

    memory: Memory
    current: Current | None = None
    duplicate_of: Duplicate | None = None


@dataclass(frozen=True)
class ReviewPage:
    items: list[ReviewItem]
    next_cursor: str | None = None

    @property
    def memories(self) -> list[Memory]:
        """The items as proposals (a change under its own id, with the proposed value)."""
        return [item.memory for item in self.items]


def as_proposal(change: ChangeProposal, memory: Memory) -> Memory:
    """The change as a review item sees it: the memory's key, scope and owner with the
    proposed value, under the change's id."""
    status = {
        ChangeStatus.PENDING: Status.PENDING_REVIEW,
        ChangeStatus.APPROVED: Status.ACTIVE,
        ChangeStatus.REJECTED: Status.REJECTED,
    }[change.status]
    return memory.model_copy(
        update={
            "id": change.id,
            "value": change.value,
            "confidence": change.confidence,
            "source_user_id": change.source_user_id,
            "source_channel_id": change.source_channel_id,
            "status": status,
            "created_at": change.created_at,
            "updated_at": change.updated_at,
            "version": 1,
        }
    )


__all__ = [
    "ChangeProposal",
    "ChangeStatus",
    "Current",
    "Duplicate",
    "ReviewItem",
    "ReviewPage",
    "as_proposal",
]
