"""A memory's recorded versions in the in-memory store: what each ``MemoryTx`` version method
and history retention make of one memory's history (oldest first), as PostgreSQL's statements
do (``engram.adapters.postgres.versions``). Pure: the store keeps the histories and journals
what these return."""

from __future__ import annotations

from datetime import datetime

from engram.adapters.inmemory_rows import recalled
from engram.memories.models import ERASED_ACTOR, RecallRequest, Scope, Status
from engram.memories.versions import DELETED, MemoryVersion, VersionPage

History = list[MemoryVersion]


def recorded(history: History, version: MemoryVersion) -> History:
    """``history`` with ``version`` recorded: the current one stops being current then."""
    after = list(history)
    if after and after[-1].valid_to is None:
        after[-1] = after[-1].model_copy(update={"valid_to": version.valid_from})
    return [*after, version]


def numbered(history: History, number: int | None) -> MemoryVersion | None:
    """Version ``number`` (None: the latest)."""
    if number is None:
        return history[-1] if history else None
    return next((v for v in history if v.version == number), None)


def page(history: History, after: int, limit: int) -> VersionPage:
    later = [v for v in history if v.version > after]
    shown = later[:limit]
    return VersionPage(
        versions=shown,
        recorded_from=history[0].version if history else None,
        next_after=shown[-1].version if len(later) > limit else None,
    )


def current_at(history: History, at: datetime) -> MemoryVersion | None:
    """The version current at ``at``: ``valid_from <= at < valid_to`` (the latest such: the
    versions a merge folded in may overlap the memory's own)."""
    return next(
        (
            v
            for v in reversed(history)
            if v.valid_from <= at and (v.valid_to is None or at < v.valid_to)
        ),
        None,
    )


def folded(row: History, into: History, into_id: str, now: datetime) -> History:
    """``into``'s history once ``row``'s is folded in: ``row``'s versions first, numbered from
    1 (the current one ended ``now``), then ``into``'s own, numbered after them."""
    moved = [
        v.model_copy(
            update={
                "memory_id": into_id,
                "version": n,
                "valid_to": now if v.valid_to is None else v.valid_to,
            }
        )
        for n, v in enumerate(row, start=1)
    ]
    shifted = [v.model_copy(update={"version": v.version + len(moved)}) for v in into]
    return moved + shifted


def recalled_at(history: History, request: RecallRequest, at: datetime) -> MemoryVersion | None:
    """The version current at ``at`` when it lies in a scope ``request`` recalls from."""
    v = current_at(history, at)
    if v is None or v.status == DELETED:
        return None
    in_scope = recalled(v.as_memory().model_copy(update={"status": Status.ACTIVE}), request)
    return v if in_scope else None


def purged(history: History, before: datetime, limit: int) -> History:
    """What history retention keeps of ``history``, removing at most ``limit`` versions: those
    that stopped being current before ``before``, and all of a memory deleted before it."""
    gone = history[-1].status == DELETED and history[-1].valid_from < before
    doomed = [v for v in history if gone or (v.valid_to is not None and v.valid_to < before)]
    doomed = doomed[: max(limit, 0)]
    return [v for v in history if v not in doomed]


def _about(v: MemoryVersion, user_id: str) -> bool:
    """As PostgreSQL's erasure judges a version: of the user's own rows, or learnt from them."""
    own = {Scope.USER: v.owner_id, Scope.PERSONA_USER: v.user_id}.get(v.scope)
    return user_id in (own, v.source_user_id)


def after_erasure(history: History, user_id: str, *, memory_erased: bool) -> History:
    """What erasing ``user_id`` leaves of ``history``: no version of an erased memory or about
    the user; the user's id off the versions they wrote of what stays."""
    return [
        v.model_copy(update={"actor_id": ERASED_ACTOR}) if v.actor_id == user_id else v
        for v in history
        if not memory_erased and not _about(v, user_id)
    ]


__all__ = [
    "History",
    "after_erasure",
    "current_at",
    "numbered",
    "page",
    "purged",
    "recalled_at",
    "recorded",
]
