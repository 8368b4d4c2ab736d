"""A store call as one unit of work: what tests that set up or inspect rows directly call.

Each opens ``with store(ctx) as tx`` and runs one read or one write of
``engram.memories.writes`` in it, as the service's use cases do.
"""

from __future__ import annotations

from datetime import datetime

from engram.memories import writes
from engram.memories.lifecycle import AuditStamp, Quotas
from engram.memories.models import (
    Memory,
    MemoryFilter,
    MemoryPage,
    NewMemory,
    Persona,
    RecallRequest,
    ReviewAction,
    Scope,
    Status,
    TeamSettings,
)
from engram.memories.ports import AccessContext, MemoryChange, UnitOfWork


def upsert(
    store: UnitOfWork, ctx: AccessContext, memory: NewMemory, *, quotas: Quotas | None = None
) -> tuple[Memory, bool]:
    with store(ctx) as tx:
        return writes.save(tx, memory, quotas)


def propose(
    store: UnitOfWork,
    ctx: AccessContext,
    memory: NewMemory,
    *,
    quotas: Quotas | None = None,
    not_erased_since_ms: int | None = None,
) -> tuple[Memory, bool] | None:
    with store(ctx) as tx:
        return writes.propose(tx, memory, quotas, not_erased_since_ms=not_erased_since_ms)


def get(store: UnitOfWork, ctx: AccessContext, memory_id: str) -> Memory | None:
    with store(ctx) as tx:
        return tx.get(memory_id)


def list_memories(store: UnitOfWork, ctx: AccessContext, flt: MemoryFilter) -> MemoryPage:
    with store(ctx) as tx:
        return tx.list_memories(flt)


def update(
    store: UnitOfWork,
    ctx: AccessContext,
    memory_id: str,
    change: MemoryChange,
    *,
    decided: AuditStamp | None = None,
    if_versions: frozenset[int] | None = None,
) -> Memory | None:
    with store(ctx) as tx:
        row = tx.lock(memory_id)
        if row is None:
            return None
        return writes.edit(tx, row, change, decided=decided, if_versions=if_versions)


def archive(store: UnitOfWork, ctx: AccessContext, memory_id: str) -> Memory | None:
    return update(store, ctx, memory_id, MemoryChange(status=Status.ARCHIVED))


def delete(
    store: UnitOfWork,
    ctx: AccessContext,
    memory_id: str,
    *,
    decided: AuditStamp | None = None,
    if_versions: frozenset[int] | None = None,
) -> bool:
    with store(ctx) as tx:
        row = tx.lock(memory_id)
        if row is None:
            return False
        return writes.delete(tx, row, decided=decided, if_versions=if_versions)


def recall(store: UnitOfWork, ctx: AccessContext, request: RecallRequest) -> list[Memory]:
    with store(ctx) as tx:
        return tx.recall(request)


def count_by_owner(store: UnitOfWork, ctx: AccessContext, scope: Scope, owner_id: str) -> int:
    with store(ctx) as tx:
        return tx.count_by_owner(scope, owner_id)


def erase_user(store: UnitOfWork, ctx: AccessContext, user_id: str) -> dict[str, int]:
    with store(ctx) as tx:
        return tx.erase_user(user_id)


def apply_retention(
    store: UnitOfWork,
    ctx: AccessContext,
    *,
    archive_before: datetime,
    delete_archived_before: datetime,
) -> dict[str, int]:
    with store(ctx) as tx:
        return tx.apply_retention(
            archive_before=archive_before, delete_archived_before=delete_archived_before
        )


def list_actions(store: UnitOfWork, ctx: AccessContext, memory_id: str) -> list[ReviewAction]:
    with store(ctx) as tx:
        return tx.list_actions(memory_id)


def get_persona(store: UnitOfWork, ctx: AccessContext, persona_id: str) -> Persona | None:
    with store(ctx) as tx:
        return tx.switches(persona_id).persona


def put_persona(store: UnitOfWork, ctx: AccessContext, persona: Persona) -> Persona:
    with store(ctx) as tx:
        return tx.put_persona(persona)


def get_team_settings(store: UnitOfWork, ctx: AccessContext) -> TeamSettings | None:
    with store(ctx) as tx:
        return tx.switches(None).team


def put_team_settings(
    store: UnitOfWork, ctx: AccessContext, settings: TeamSettings
) -> TeamSettings:
    with store(ctx) as tx:
        return tx.put_team_settings(settings)
