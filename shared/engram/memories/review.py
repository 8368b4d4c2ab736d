"""The review pipeline of extraction proposals: team admins list, approve (optionally
edited) and reject pending memories, one by one or in bulk, each decision audited."""

from __future__ import annotations

from dataclasses import dataclass

from engram.errors import Conflict, EngramError, Forbidden, InvalidInput, NotFound
from engram.identity import Caller
from engram.memories import writes
from engram.memories.changes import Current, ReviewItem, ReviewPage, as_proposal
from engram.memories.commands import Approve, BulkReview, ListPending
from engram.memories.core import MemoryCore
from engram.memories.cursors import encode_cursor
from engram.memories.history import MemoryHistories
from engram.memories.lifecycle import private_to_its_user
from engram.memories.models import Memory, MemoryFilter, ReviewAction, Status
from engram.memories.ports import AccessContext, MemoryChange, MemoryTx
from engram.memories.privacy import context_for


def _current(tx: MemoryTx, row: Memory) -> Current:
    """What a change would replace. A user's own ``user`` memory is theirs alone, so its value
    is shown to a reviewer only while it is one its owner did not write (an approved proposal,
    say: the reviewers saw it); a value the user saved or edited is withheld (``None``)."""
    if not private_to_its_user(tx.ctx, row):
        return Current(row.id, row.version, row.value)
    latest = tx.version(row.id, None)
    seen = latest is not None and latest.actor_id != row.owner_id and latest.value == row.value
    return Current(row.id, row.version, row.value if seen else None)


@dataclass(frozen=True)
class ReviewOutcome:
    """One id of a bulk review: the decided memory, or the error that id alone met (the
    same error a single approval or rejection of it would raise)."""

    memory_id: str
    memory: Memory | None = None
    error: EngramError | None = None


class ReviewPipeline:
    """Team admins decide proposals; every memory keeps its audit trail."""

    def __init__(self, core: MemoryCore) -> None:
        self._core = core

    def _admin(self, caller: Caller) -> AccessContext:
        if not caller.can_administer_team(caller.team_id):
            raise Forbidden("only team admins review memories")
        return context_for(caller)

    def list_pending(self, caller: Caller, query: ListPending | None = None) -> ReviewPage:
        """One page of the team's review queue, newest first: pending proposals and pending
        changes of active memories (``current``: what each would replace), merged on
        (created, id). ``next_cursor`` is signed (``engram.memories.cursors``) for this team
        and persona filter; a ``cursor`` this service did not issue for the same listing
        raises ``InvalidInput("cursor")``."""
        query = query or ListPending()
        ctx = self._admin(caller)
        listing = ("review", caller.team_id, query.persona_id or "")
        flt = MemoryFilter(
            team_id=caller.team_id,
            status=Status.PENDING_REVIEW,
            persona_id=query.persona_id,
            limit=query.limit,
            cursor=self._core.cursors.open(query.cursor, *listing),
        )
        with self._core.uow(ctx) as tx:
            proposals = tx.list_memories(flt)
            items = [
                ReviewItem(m, duplicate_of=self._core.duplicate_of(tx, m))
                for m in proposals.memories
            ] + [
                ReviewItem(as_proposal(c, row), current=_current(tx, row))
                for c, row in tx.list_changes(flt)
            ]
        items.sort(key=lambda i: (i.memory.created_at, i.memory.id), reverse=True)
        more = proposals.next_cursor is not None or len(items) > flt.limit
        page = items[: flt.limit]
        last = page[-1].memory if page else None
        cursor = encode_cursor(last.created_at, last.id) if more and last else None
        return ReviewPage(page, self._core.cursors.sign(cursor, *listing))

    def approve(self, caller: Caller, memory_id: str, edit: Approve | None = None) -> Memory:
        """Approve a pending proposal, first applying ``edit`` (a new key and/or value).
        ``NotFound`` when there is no such proposal the admin may see; ``Conflict`` when it was
        already decided (the loser of two concurrent decisions). The change, its audit row and
        its event are one unit of work."""
        with self._core.uow(self._admin(caller)) as tx:
            return self._decide(tx, memory_id, "approve", edit)

    def reject(self, caller: Caller, memory_id: str) -> Memory:
        """Reject a pending proposal: it becomes ``rejected`` and its key and value are
        suppressed, so an equal proposal is never made again, until erasure. A new value of
        its key may be proposed (it replaces the rejected row). Errors as ``approve``."""
        with self._core.uow(self._admin(caller)) as tx:
            return self._decide(tx, memory_id, "reject")

    def review_many(self, caller: Caller, request: BulkReview) -> list[ReviewOutcome]:
        """Approve or reject each id of ``request``, in order, in one unit of work where each
        id is its own step (a savepoint) with its own audit row, exactly as ``approve`` /
        ``reject`` one by one: an id already decided reports ``Conflict``, an unknown one
        ``NotFound``, and neither stops the others. ``Forbidden`` for a caller who is not an
        admin of the team (nothing decided)."""
        outcomes: list[ReviewOutcome] = []
        with self._core.uow(self._admin(caller)) as tx:
            for memory_id in request.ids:
                try:
                    with tx.savepoint():
                        decided = self._decide(tx, memory_id, request.action)
                    outcomes.append(ReviewOutcome(memory_id, memory=decided))
                except EngramError as exc:
                    outcomes.append(ReviewOutcome(memory_id, error=exc))
        return outcomes

    def _decide(
        self, tx: MemoryTx, memory_id: str, action: str, edit: Approve | None = None
    ) -> Memory:
        proposed = tx.lock(memory_id)
        if proposed is None:
            return self._decide_change(tx, memory_id, action, edit)
        if action == "approve":
            key, value = (edit.key, edit.value) if edit is not None else (None, None)
            decision = self._core.embedded(
                proposed, MemoryChange(status=Status.ACTIVE, key=key, value=value)
            )
        else:
            decision = MemoryChange(status=Status.REJECTED)
        return writes.review(tx, proposed, decision, decided=self._core.decided(tx.ctx, action))

    def _decide_change(
        self, tx: MemoryTx, change_id: str, action: str, edit: Approve | None
    ) -> Memory:
        """A change proposal's decision: its memory locked first, then the change (the
        order every writer takes), which must still be that memory's pending change."""
        found = tx.get_change(change_id)
        row = tx.lock(found.memory_id) if found is not None else None
        if found is None or row is None:
            raise NotFound("no pending memory with this id")
        change = tx.change_for(row.id)
        if change is None or change.id != found.id:
            raise Conflict(f"this change was already reviewed (it is {found.status.value})")
        value = None
        if action == "approve":
            if edit is not None and edit.key is not None:
                raise InvalidInput("key", "a change proposal changes the value only")
            new_value = edit.value if edit is not None and edit.value else change.value
            value = self._core.embedded(row, MemoryChange(value=new_value))
        return writes.decide_change(
            tx,
            change,
            row,
            approve=action == "approve",
            decided=self._core.decided(tx.ctx, action),
            value=value,
        )

    def history(self, caller: Caller, memory_id: str) -> list[ReviewAction]:
        """The audit trail of one memory, oldest first, also after it was deleted
        (``MemoryHistories.history``, who may read it included)."""
        return MemoryHistories(self._core).history(caller, memory_id).actions
