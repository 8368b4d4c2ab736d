"""The row rules of the in-memory memory store, as pure functions: the key a row is unique
by, its suppression key, cursors, which rows a listing or a recall takes, and what an
erasure leaves of the audit."""

from __future__ import annotations

from typing import Any, Protocol

from engram.memories.cursors import decode_cursor, encode_cursor
from engram.memories.keys import canonical_key
from engram.memories.lifecycle import suppression_digest
from engram.memories.models import (
    ERASED_ACTOR,
    PROPOSAL_STATUSES,
    Memory,
    MemoryFilter,
    MemoryPage,
    NewMemory,
    RecallRequest,
    ReviewAction,
    Scope,
    Status,
    audit_is_about,
)

DedupKey = tuple[str, Scope, str, str, str]


SuppressionKey = tuple[str, Scope, str, str, bytes]


#: a table entry deleted (the in-memory journal's marker)
MISSING: Any = object()


def key_of(m: Memory | NewMemory) -> DedupKey:
    """A key's identity: its canonical form (``engram.memories.keys``)."""
    return (m.team_id, m.scope, m.owner_id, m.user_id or "", canonical_key(m.key))


def suppression_key(m: Memory | NewMemory) -> SuppressionKey:
    return (m.team_id, m.scope, m.owner_id, m.user_id or "", suppression_digest(m.key, m.value))


def suppression_user(k: SuppressionKey) -> str | None:
    """The user a suppression is about (as ``subject_user``; persona rows: none)."""
    _, scope, owner, user, _ = k
    return owner if scope is Scope.USER else (user or None)


def _listed(r: Memory, flt: MemoryFilter) -> bool:
    """The listing rules of ``MemoryFilter`` beyond equality: an admin's view of other users'
    ``user`` rows, a user's view of persona proposals, and the personas closed to them."""
    if (
        flt.managed_by is not None
        and r.scope is Scope.USER
        and r.owner_id != flt.managed_by
        and r.status not in PROPOSAL_STATUSES
    ):
        return False
    if (
        flt.member is not None
        and r.scope is Scope.PERSONA
        and r.status in PROPOSAL_STATUSES
        and r.source_user_id != flt.member
    ):
        return False
    return r.scope is not Scope.PERSONA or r.owner_id not in flt.exclude_personas


class ErasureRecords(Protocol):
    """The part of ``engram.maintenance.ports.ErasureLog`` the store consults and writes."""

    def record(self, team_id: str, user_id: str, at_ms: int) -> None: ...

    def erased_since(self, team_id: str, user_id: str, since_ms: int) -> bool: ...


def matches(r: Memory, flt: MemoryFilter) -> bool:
    """Whether ``r`` belongs in the listing ``flt`` describes (before paging)."""
    if r.team_id != flt.team_id or not _listed(r, flt):
        return False
    equal = (
        (flt.scope, r.scope),
        (flt.owner_id, r.owner_id),
        (flt.user_id, r.user_id),
        (flt.status, r.status),
        (flt.source_user_id, r.source_user_id),
        (flt.source_channel_id, r.source_channel_id),
    )
    if any(wanted is not None and wanted != actual for wanted, actual in equal):
        return False
    if flt.persona_id is not None and not (
        r.scope in (Scope.PERSONA, Scope.PERSONA_USER) and r.owner_id == flt.persona_id
    ):
        return False
    if flt.updated_after is not None and r.updated_at <= flt.updated_after:
        return False
    return flt.updated_before is None or r.updated_at < flt.updated_before


def page_of(rows: list[Memory], flt: MemoryFilter) -> MemoryPage:
    """Newest first by creation, from after ``flt.cursor``, at most ``flt.limit`` rows."""
    out = sorted(rows, key=lambda r: (r.created_at, r.id), reverse=True)
    if flt.cursor:
        when, after_id = decode_cursor(flt.cursor)
        out = [r for r in out if (r.created_at, r.id) < (when, after_id)]
    page = out[: flt.limit]
    nxt = encode_cursor(page[-1].created_at, page[-1].id) if len(out) > flt.limit and page else None
    return MemoryPage(memories=page, next_cursor=nxt)


def recalled(r: Memory, request: RecallRequest) -> bool:
    """The rows one recall may rank: active, the user's own, and the persona's (its
    ``persona`` rows and the user's ``persona_user`` rows) when a persona is named."""
    if r.status is not Status.ACTIVE or r.team_id != request.team_id:
        return False
    if r.scope is Scope.USER:
        return r.owner_id == request.user_id
    if request.persona_id is None or r.owner_id != request.persona_id:
        return False
    return r.scope is Scope.PERSONA or r.user_id == request.user_id


def audit_after_erasure(
    actions: list[ReviewAction], team_id: str, user_id: str, erased: set[str]
) -> tuple[list[ReviewAction], int]:
    """The audit rows an erasure keeps, and how many it removed: rows about the user or about
    an erased memory go; the user's actor id comes off the rest of the team's rows."""
    team = [a for a in actions if a.team_id == team_id]
    legacy = {  # rows written before about_user_id: judged by their copies
        a.memory_id for a in team if a.about_user_id is None and audit_is_about(a, user_id)
    }
    kept: list[ReviewAction] = []
    removed = 0
    for a in actions:
        about = a.about_user_id == user_id or a.memory_id in erased
        if a.team_id != team_id:
            kept.append(a)
        elif about or (a.about_user_id is None and a.memory_id in legacy):
            removed += 1
        else:
            erase_actor = a.actor_id == user_id
            kept.append(a.model_copy(update={"actor_id": ERASED_ACTOR}) if erase_actor else a)
    return kept, removed
