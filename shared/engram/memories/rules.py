"""What a write of explicit memories does, as pure functions over the rows its unit of work
has read or locked. Both stores run the same rules: ``engram.memories.writes`` applies them
inside one transaction, and the stores only read, lock and write rows.

* A key (team, scope, owner, user, key) has one row, whatever its status. A rejected row gives
  way to a write that gives its key a new value (``gives_way``); the rejected value stays
  refused by the suppression its rejection recorded.
* Quotas: a write that creates a live row needs room on every limited counter it counts
  toward (``quota_refusal``), checked on counters the transaction has locked.
* A proposal (``proposal_refused``) is dropped when its key and value are suppressed or held
  by a rejected row, when the key's row is active with that very value, or when a person
  edited the key's pending proposal (their edit holds until it is reviewed). A new value for
  an active key is a change proposal beside the row (``proposes_change``).
* A merge (``check_merge``) folds one live memory into another of the same owner and scope.
* A person's decision: a rejected row is never edited back into play (``check_editable``);
  a review decides only a pending row (``check_pending``); a deletion, an archive and a
  rejection are suppressed (``suppresses``); a key or value a person gave marks the row
  edited (``marks_edit``).
* Privacy: a user's own ``user`` memory is theirs alone
  (``engram.memories.lifecycle.private_to_its_user``).
"""

from __future__ import annotations

from typing import Literal

from engram.errors import Conflict, InvalidInput, QuotaExceeded
from engram.memories.lifecycle import QuotaSubject
from engram.memories.models import Memory, NewMemory, Status
from engram.memories.ports import KeyRow, MemoryChange

Refusal = Literal["suppressed", "current", "edited"]


def gives_way(current: KeyRow | None) -> Memory | None:
    """The key's rejected row, which a write of a new row for its key deletes first; none
    when the key's row is live."""
    if current is None or current.memory.status is not Status.REJECTED:
        return None
    return current.memory


def quota_refusal(subjects: list[QuotaSubject], used: dict[str, int]) -> QuotaExceeded | None:
    """The refusal of the first counter with no room for one more row (None: room on all)."""
    for subject in subjects:
        if used.get(f"{subject.kind}/{subject.subject}", 0) >= subject.limit:
            return subject.exceeded()
    return None


def proposal_refused(
    proposal: NewMemory, current: KeyRow | None, *, suppressed: bool
) -> Refusal | None:
    """Why a proposal writes nothing (None: it is written, as a new row, or over the key's
    pending or archived row). ``suppressed``: a suppression holds its key and value."""
    if suppressed:
        return "suppressed"
    if current is None:
        return None
    row = current.memory
    if row.status is Status.REJECTED:
        return "suppressed" if row.value == proposal.value else None
    if row.status is Status.ACTIVE and row.value == proposal.value:
        return "current"
    if row.status is Status.PENDING_REVIEW and current.edited:
        return "edited"
    return None


def proposes_change(current: KeyRow | None) -> bool:
    """Whether a proposal (not refused) is a change of the key's active row, stored beside it
    for a reviewer, rather than a write of the key's row."""
    return current is not None and current.memory.status is Status.ACTIVE


def check_editable(row: Memory) -> None:
    """``Conflict`` for a rejected row: a rejection is never edited back into play."""
    if row.status is Status.REJECTED:
        raise Conflict("a rejected proposal cannot be edited; delete it instead")


def check_pending(row: Memory) -> None:
    """``Conflict`` unless ``row`` waits for review (the loser of two concurrent decisions)."""
    if row.status is not Status.PENDING_REVIEW:
        raise Conflict(f"this memory was already reviewed (it is {row.status.value})")


def key_taken(row: Memory, other: KeyRow | None) -> bool:
    """Whether another live row holds the key ``row`` is given."""
    return (
        other is not None
        and other.memory.id != row.id
        and other.memory.status is not Status.REJECTED
    )


def check_merge(row: Memory, into: Memory) -> None:
    """``InvalidInput`` naming ``into`` unless ``row`` may be folded into ``into``: two live
    memories of one owner and scope (and user), not the same one."""
    if row.id == into.id:
        raise InvalidInput("into", "a memory cannot be merged into itself")
    if (row.scope, row.owner_id, row.user_id) != (into.scope, into.owner_id, into.user_id):
        raise InvalidInput("into", "only memories of the same owner and scope can be merged")
    if Status.REJECTED in (row.status, into.status):
        raise InvalidInput("into", "a rejected proposal cannot be merged")


def marks_edit(change: MemoryChange, *, by_person: bool) -> bool:
    """A key or value a person gave marks the row as their edit."""
    return by_person and change.new_text


def suppresses(before: Memory | None, after: Memory | None, *, by_person: bool) -> bool:
    """Whether a change is remembered as refused: a person's deletion (``after`` None) or
    archive of a row not yet archived, and every rejection."""
    if after is not None and after.status is Status.REJECTED:
        return True
    if not by_person:
        return False
    if after is None:
        return True
    return after.status is Status.ARCHIVED and (
        before is None or before.status is not Status.ARCHIVED
    )


__all__ = [
    "Refusal",
    "check_editable",
    "check_merge",
    "check_pending",
    "gives_way",
    "key_taken",
    "marks_edit",
    "proposal_refused",
    "proposes_change",
    "quota_refusal",
    "suppresses",
]
