"""The writes of explicit memories inside one unit of work: each reads or locks the rows it
decides on, applies ``engram.memories.rules`` to them, and writes the row, its audit row,
its suppression and its outbox event through the same transaction (``MemoryTx``), which the
caller's ``with uow(ctx) as tx`` commits or rolls back as a whole."""

from __future__ import annotations

import uuid
from collections.abc import Callable

from engram.errors import Conflict
from engram.events.models import SERVICE_ACTOR, MemoryEventType
from engram.memories import rules
from engram.memories.changes import ChangeProposal, ChangeStatus, as_proposal
from engram.memories.lifecycle import AuditStamp, Quotas, audit_row, check_version
from engram.memories.models import LIVE_STATUSES, Memory, NewMemory, Status
from engram.memories.ports import MemoryChange, MemoryTx
from engram.memories.versions import (
    EXTRACTION,
    MAINTENANCE,
    Actor,
    MemoryVersion,
    actor_of,
    is_new_version,
    service_actor,
    version_of,
)

#: how often a proposal decides again after a concurrent writer gave its key a row first
_PROPOSAL_ATTEMPTS = 3


def _versioned(tx: MemoryTx, before: Memory | None, after: Memory, actor: Actor) -> None:
    """Record ``after`` as the memory's next version when it is one."""
    if is_new_version(before, after):
        tx.record_version(version_of(after, actor, tx.now))


def _deleted(tx: MemoryTx, gone: Memory, actor: Actor) -> None:
    tx.record_version(version_of(gone, actor, tx.now, deleted=True))


def _drop(tx: MemoryTx, row: Memory) -> None:
    """Delete a rejected row that gives way to a write of its key (the service's doing)."""
    gone = tx.remove(row.id)
    if gone is not None:
        tx.publish("memory.deleted", gone, actor_id=SERVICE_ACTOR, cause="service", deleted=True)
        _deleted(tx, gone, service_actor(tx.ctx))


def save(tx: MemoryTx, memory: NewMemory, quotas: Quotas | None = None) -> tuple[Memory, bool]:
    """Create, or update the key's row (a rejected row of the key gives way to a new row).
    ``QuotaExceeded`` when a new live row has no room: the caller's transaction rolls back."""
    subjects = quotas.subjects(memory) if quotas and memory.status in LIVE_STATUSES else []
    used = tx.usage(subjects)
    saved = tx.save(memory)
    if saved is None:  # the key's row is a rejected proposal: it gives way to the save
        rejected = rules.gives_way(
            tx.lock_key(memory.scope, memory.owner_id, memory.user_id, memory.key)
        )
        if rejected is not None:
            _drop(tx, rejected)
        saved = tx.save(memory)
        if saved is None:
            raise Conflict("the memory's key changed while it was saved; try again")
    row, created, changed = saved
    if created and (refusal := rules.quota_refusal(subjects, used)) is not None:
        raise refusal
    if changed:
        tx.record_version(version_of(row, actor_of(tx.ctx, row), tx.now))
    return row, created


def propose(
    tx: MemoryTx,
    memory: NewMemory,
    quotas: Quotas | None = None,
    *,
    not_erased_since_ms: int | None = None,
) -> tuple[Memory, bool] | None:
    """A ``pending_review`` proposal learnt from ``memory.source_user_id``: a new row, or the
    key's pending or archived row refreshed (created False). ``None``, nothing written, when
    the user was erased at or after ``not_erased_since_ms``, when ``rules.proposal_refused``
    says so, or when a new row has no room under a quota."""
    user = memory.source_user_id
    if not_erased_since_ms is not None and user and tx.erased_since(user, not_erased_since_ms):
        return None
    suppressed = tx.suppressed(memory)
    # the quota counters first, then the key's row: the order a save locks them in
    subjects = quotas.subjects(memory) if quotas else []
    used = tx.usage(subjects)
    for _ in range(_PROPOSAL_ATTEMPTS):
        current = tx.lock_key(memory.scope, memory.owner_id, memory.user_id, memory.key)
        if rules.proposal_refused(memory, current, suppressed=suppressed) is not None:
            return None
        if current is not None and rules.proposes_change(current):
            return _propose_change(tx, current.memory, memory)
        live = None if current is None or current.memory.status is Status.REJECTED else current
        if live is not None:
            row, created = tx.overwrite(live.memory, memory), False
            _versioned(tx, live.memory, row, EXTRACTION)
        else:
            if rules.quota_refusal(subjects, used) is not None:
                return None
            rejected = rules.gives_way(current)  # of another value: an equal one was refused
            if rejected is not None:
                _drop(tx, rejected)
            inserted = tx.insert(memory)
            if inserted is None:
                continue  # a concurrent write gave the key a row: decide again on that row
            row, created = inserted, True
            _versioned(tx, None, row, EXTRACTION)
        tx.publish("memory.proposed", row, actor_id=SERVICE_ACTOR, cause="extraction")
        return row, created
    return None


def _propose_change(tx: MemoryTx, row: Memory, memory: NewMemory) -> tuple[Memory, bool]:
    """``memory``'s value as the pending change of the active ``row`` (locked): a new change,
    or the row's pending one refreshed with the newer value. As the review queue shows it."""
    pending = tx.change_for(row.id)
    change = ChangeProposal(
        id=pending.id if pending is not None else str(uuid.uuid4()),
        team_id=row.team_id,
        memory_id=row.id,
        value=memory.value,
        confidence=memory.confidence,
        source_user_id=memory.source_user_id,
        source_channel_id=memory.source_channel_id,
        created_at=pending.created_at if pending is not None else tx.now,
        updated_at=tx.now,
    )
    tx.put_change(change)
    return as_proposal(change, row), pending is None


def decide_change(
    tx: MemoryTx,
    change: ChangeProposal,
    row: Memory,
    *,
    approve: bool,
    decided: AuditStamp,
    value: MemoryChange | None = None,
) -> Memory:
    """Decide the pending ``change`` of the locked ``row``. Approving makes its value (or
    ``value``'s, an edit with its embedding) the row's next version, under the row's id;
    rejecting leaves the row as it is and suppresses the proposed value for the key. The
    decided memory (approved) or the change as a rejected proposal."""
    proposed = as_proposal(change, row)
    status = ChangeStatus.APPROVED if approve else ChangeStatus.REJECTED
    tx.put_change(change.model_copy(update={"status": status, "updated_at": tx.now}))
    if not approve:
        refused = proposed.model_copy(update={"status": Status.REJECTED})
        tx.suppress(refused)
        tx.audit(audit_row(decided, row.id, proposed, refused))
        return refused
    rules.check_editable(row)
    after = tx.change(row, value or MemoryChange(value=change.value))
    if after is None:
        raise Conflict("this memory changed while the change was reviewed; try again")
    actor = actor_of(tx.ctx, row)
    tx.publish("memory.updated", after, actor_id=actor.id, cause="review")
    _versioned(tx, row, after, actor)
    tx.audit(audit_row(decided, after.id, row, after))
    return after


def merge(
    tx: MemoryTx,
    row: Memory,
    into: Memory,
    *,
    decided: AuditStamp,
    if_versions: frozenset[int] | None = None,
) -> Memory:
    """Fold the locked ``row`` into the locked ``into`` (``rules.check_merge``): ``row``'s
    versions become ``into``'s earliest, ``row`` is removed and its key and value suppressed
    (a person said it is the same fact), ``memory.merged`` names both and ``memory.updated``
    gives ``into``'s new version. ``into`` as it now is."""
    check_version(row, if_versions)
    rules.check_merge(row, into)
    after = tx.fold(row, into)
    gone = tx.remove(row.id)
    if gone is None:
        raise Conflict("the memory changed while it was merged; try again")
    actor = actor_of(tx.ctx, gone)
    tx.publish("memory.merged", gone, actor_id=actor.id, cause="api", deleted=True, into=after.id)
    tx.publish("memory.updated", after, actor_id=actor.id, cause="api")  # its version moved
    tx.audit(audit_row(decided, after.id, gone, after))
    tx.suppress(gone)
    return after


def _move_key(tx: MemoryTx, row: Memory, change: MemoryChange) -> None:
    """Before ``row`` takes a new key: that key's rejected row gives way, a live one is a
    ``Conflict``."""
    if change.key is None or change.key == row.key:
        return
    other = tx.lock_key(row.scope, row.owner_id, row.user_id, change.key)
    if rules.key_taken(row, other):
        raise Conflict("a memory with this key already exists in this scope")
    rejected = rules.gives_way(other)
    if rejected is not None:
        _drop(tx, rejected)


def edit(
    tx: MemoryTx,
    row: Memory,
    change: MemoryChange,
    *,
    decided: AuditStamp | None = None,
    if_versions: frozenset[int] | None = None,
) -> Memory | None:
    """Apply ``change`` to the locked ``row``. ``decided``: a person's change, audited (and an
    archive suppressed) in the same transaction; without it the service's own. ``None`` when
    the row may not be written."""
    check_version(row, if_versions)
    rules.check_editable(row)
    by_person = decided is not None
    _move_key(tx, row, change)
    after = tx.change(row, change, edited=rules.marks_edit(change, by_person=by_person))
    if after is None:
        return None
    actor = actor_of(tx.ctx, row) if by_person else MAINTENANCE
    tx.publish("memory.updated", after, actor_id=actor.id, cause="api" if by_person else "service")
    _versioned(tx, row, after, actor)
    if decided is not None:
        tx.audit(audit_row(decided, after.id, row, after))
    if rules.suppresses(row, after, by_person=by_person):
        tx.suppress(after)
    return after


def review(tx: MemoryTx, row: Memory, decision: MemoryChange, *, decided: AuditStamp) -> Memory:
    """Decide the locked proposal ``row``: ``decision.status`` is active or rejected, its key
    and value an optional edit. ``Conflict`` when it is no longer pending or its new key is
    taken."""
    rules.check_pending(row)
    _move_key(tx, row, decision)
    after = tx.change(row, decision)
    if after is None:
        raise Conflict("this memory was already reviewed")
    event: MemoryEventType = (
        "memory.approved" if decision.status is Status.ACTIVE else "memory.rejected"
    )
    tx.publish(event, after, actor_id=tx.ctx.user_id, cause="review")
    _versioned(tx, row, after, actor_of(tx.ctx, row))
    tx.audit(audit_row(decided, after.id, row, after))
    if rules.suppresses(row, after, by_person=True):
        tx.suppress(after)  # the value stays refused once a new value of the key replaces it
    return after


def delete(
    tx: MemoryTx,
    row: Memory,
    *,
    decided: AuditStamp | None = None,
    if_versions: frozenset[int] | None = None,
    erasing: bool = False,
) -> bool:
    """Hard-delete the locked ``row``; ``decided``: a person's deletion, audited and
    suppressed in the same transaction (retention and erasure pass none). ``erasing``: of an
    erased user, so its history goes with it instead of recording the deletion."""
    check_version(row, if_versions)
    gone = tx.remove(row.id)
    if gone is None:
        return False
    by_person = decided is not None
    tx.publish(
        "memory.deleted",
        gone,
        actor_id=tx.ctx.user_id if by_person else SERVICE_ACTOR,
        cause="api" if by_person else "service",
        deleted=True,
    )
    if erasing:
        tx.forget_versions(gone.id)
    else:
        _deleted(tx, gone, actor_of(tx.ctx, gone) if by_person else MAINTENANCE)
    if decided is not None:
        tx.audit(audit_row(decided, gone.id, gone, None))
    if rules.suppresses(gone, None, by_person=by_person):
        tx.suppress(gone)
    return True


def restore(
    tx: MemoryTx,
    row: Memory | None,
    target: MemoryVersion,
    *,
    decided: AuditStamp,
    if_versions: frozenset[int] | None = None,
    quotas: Quotas | None = None,
    embedded: Callable[[Memory, MemoryChange], MemoryChange] | None = None,
) -> Memory:
    """Make ``target``'s key and value current as a new version: of the locked ``row``, or —
    the memory deleted (``row`` None) — of the memory brought back, active, under its id
    (embedded later, by the backlog). ``embedded`` gives the change its embedding.
    ``Conflict`` when its key now names another memory."""
    latest = tx.version(target.memory_id, None)
    assert latest is not None, "target is one of the memory's versions"
    if row is not None:
        check_version(row, if_versions)
        change = MemoryChange(key=target.key, value=target.value)
        change = embedded(row, change) if embedded is not None else change
        _move_key(tx, row, change)
        after = tx.change(row, change, edited=True)
        if after is None:
            raise Conflict("the memory changed while it was restored; try again")
        before: Memory | None = row
    else:
        check_version(latest.as_memory(), if_versions)
        revived = latest.as_memory().model_copy(
            update={
                "key": target.key,
                "value": target.value,
                "status": Status.ACTIVE,
                "version": latest.version + 1,
            }
        )
        # the quota counters first, then the key's row: the order a save locks them in
        subjects = quotas.subjects(NewMemory(**revived.internal_fields())) if quotas else []
        used = tx.usage(subjects)
        other = tx.lock_key(revived.scope, revived.owner_id, revived.user_id, revived.key)
        if rules.key_taken(revived, other):
            raise Conflict("a memory with this key already exists in this scope")
        if (refusal := rules.quota_refusal(subjects, used)) is not None:
            raise refusal
        rejected = rules.gives_way(other)
        if rejected is not None:
            _drop(tx, rejected)
        after = tx.revive(revived)
        before = None
    actor = actor_of(tx.ctx, after)
    tx.publish("memory.restored", after, actor_id=actor.id, cause="api")
    tx.record_version(version_of(after, actor, tx.now))
    tx.audit(audit_row(decided, after.id, before, after))
    return after


__all__ = ["decide_change", "delete", "edit", "merge", "propose", "restore", "review", "save"]
