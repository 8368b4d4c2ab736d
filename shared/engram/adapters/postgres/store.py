# ruff: noqa: S608 - SQL is composed only from constants in this module; values are bound.
"""``PostgresMemoryStore``: MemoryStore + PersonaStore on PostgreSQL with pgvector.

Every call runs in one transaction as the application role with the tenant in
transaction-local settings (see ``pool.Database.tenant``), so row-level security filters
every statement; the explicit team/owner predicates below are there for the indexes.
"""

from __future__ import annotations

import uuid
from datetime import UTC, datetime
from typing import Any

from psycopg.rows import dict_row

from engram.adapters.inmemory_memories import decode_cursor, encode_cursor
from engram.adapters.postgres import saving
from engram.adapters.postgres.embeddings import PostgresEmbeddingBacklog
from engram.adapters.postgres.lifecycle import (
    PROPOSE_SQL,
    change_row,
    drop_rejected,
    erase_user,
    insert_audit,
    insert_suppression,
    lock_quotas,
    lock_row,
    refuse_past_limits,
)
from engram.adapters.postgres.outbox import append_memory_event
from engram.adapters.postgres.personas import PostgresPersonaStore
from engram.adapters.postgres.recall import recall_sql
from engram.adapters.postgres.rows import COLUMNS, action_from_row
from engram.adapters.postgres.rows import as_uuid as _uuid
from engram.adapters.postgres.rows import memory_from_row as _memory
from engram.adapters.postgres.rows import vector_literal as _vector
from engram.errors import Conflict, InvalidInput, QuotaExceeded
from engram.events.models import SERVICE_ACTOR
from engram.memories.lifecycle import (
    AuditStamp,
    Quotas,
    audit_row,
    check_version,
    suppression_digest,
)
from engram.memories.models import (
    LIVE_STATUSES,
    Memory,
    MemoryFilter,
    MemoryPage,
    NewMemory,
    RecallRequest,
    ReviewAction,
    Scope,
    Status,
)
from engram.memories.ports import AccessContext, MemoryChange, MemoryStore


class _NotProposed(Exception):
    """A proposal wrote nothing: its transaction is rolled back."""


class PostgresMemoryStore(PostgresEmbeddingBacklog, PostgresPersonaStore, MemoryStore):
    """``MemoryStore`` (here), ``EmbeddingBacklog`` and ``PersonaStore`` (inherited) on one
    database."""

    # --- MemoryStore ------------------------------------------------------------------------
    def upsert(
        self, ctx: AccessContext, memory: NewMemory, *, quotas: Quotas | None = None
    ) -> tuple[Memory, bool]:
        subjects = quotas.subjects(memory) if quotas else []
        values = self._values(memory)
        with self._db.tenant(ctx) as conn, conn.cursor(row_factory=dict_row) as cur:
            used = lock_quotas(cur, ctx.team_id, subjects)
            params = saving.save_params(values, memory, actor_id=ctx.user_id)
            cur.execute(saving.SAVE_UNLESS_REJECTED_SQL, params)
            row = cur.fetchone()
            if row is None:  # the key's row is a rejected proposal: it gives way to the save
                drop_rejected(cur, memory, at=values["now"])
                cur.execute(saving.SAVE_SQL, params)
                row = cur.fetchone()
            assert row is not None
            saved = _memory(row)
            if row["created"] and memory.status in LIVE_STATUSES:
                refuse_past_limits(subjects, used)
        return saved, bool(row["created"])

    def propose(
        self,
        ctx: AccessContext,
        memory: NewMemory,
        *,
        quotas: Quotas | None = None,
        not_erased_since_ms: int | None = None,
    ) -> tuple[Memory, bool] | None:
        subjects = quotas.subjects(memory) if quotas else []
        values = {
            **self._values(memory),
            "digest": suppression_digest(memory.key, memory.value),
            "since": None
            if not_erased_since_ms is None
            else datetime.fromtimestamp(not_erased_since_ms / 1000, UTC),
        }
        try:
            with self._db.tenant(ctx) as conn, conn.cursor(row_factory=dict_row) as cur:
                used = lock_quotas(cur, ctx.team_id, subjects)
                drop_rejected(cur, memory, unless_value=memory.value, at=values["now"])
                cur.execute(PROPOSE_SQL, values)
                row = cur.fetchone()
                if row is None:
                    raise _NotProposed  # roll back: a rejected row dropped above stays
                append_memory_event(
                    cur,
                    "memory.proposed",
                    _memory(row),
                    actor_id=SERVICE_ACTOR,
                    cause="extraction",
                    at=values["now"],
                )
                if row["created"]:
                    refuse_past_limits(subjects, used)
        except (QuotaExceeded, _NotProposed):
            return None
        return _memory(row), bool(row["created"])

    def _values(self, memory: NewMemory) -> dict[str, Any]:
        return {
            "id": uuid.uuid4(),
            "team": memory.team_id,
            "scope": memory.scope.value,
            "owner": memory.owner_id,
            "user": memory.user_id,
            "key": memory.key,
            "value": memory.value,
            "channel": memory.source_channel_id,
            "source": memory.source_user_id,
            "confidence": memory.confidence,
            "status": memory.status.value,
            "embedding": _vector(memory.embedding),
            "embedding_model": memory.embedding_model,
            "embedding_dims": len(memory.embedding) if memory.embedding is not None else None,
            "now": self._now(),
        }

    def get(self, ctx: AccessContext, memory_id: str) -> Memory | None:
        mid = _uuid(memory_id)
        if mid is None:
            return None
        with self._db.tenant(ctx) as conn, conn.cursor(row_factory=dict_row) as cur:
            cur.execute(
                f"SELECT {COLUMNS} FROM memories m WHERE m.id = %s AND m.team_id = %s",
                (mid, ctx.team_id),
            )
            row = cur.fetchone()
        return _memory(row) if row else None

    def find_by_key(
        self, ctx: AccessContext, scope: Scope, owner_id: str, user_id: str | None, key: str
    ) -> Memory | None:
        with self._db.tenant(ctx) as conn, conn.cursor(row_factory=dict_row) as cur:
            cur.execute(
                f"SELECT {COLUMNS} FROM memories m WHERE m.team_id = %s AND m.scope = %s"
                " AND m.owner_id = %s AND COALESCE(m.user_id, '') = %s AND m.key = %s"
                " AND m.status <> 'rejected'",
                (ctx.team_id, scope.value, owner_id, user_id or "", key),
            )
            row = cur.fetchone()
        return _memory(row) if row else None

    def list_memories(self, ctx: AccessContext, flt: MemoryFilter) -> MemoryPage:
        where = ["m.team_id = %s"]
        params: list[Any] = [flt.team_id]
        for column, value in (
            ("m.scope", flt.scope.value if flt.scope else None),
            ("m.owner_id", flt.owner_id),
            ("m.user_id", flt.user_id),
            ("m.status", flt.status.value if flt.status else None),
            ("m.source_user_id", flt.source_user_id),
            ("m.source_channel_id", flt.source_channel_id),
        ):
            if value is not None:
                where.append(f"{column} = %s")
                params.append(value)
        if flt.persona_id is not None:
            where.append("m.scope IN ('persona', 'persona_user') AND m.owner_id = %s")
            params.append(flt.persona_id)
        if flt.managed_by is not None:  # an admin: other users' user rows only as proposals
            where.append(
                "(m.scope <> 'user' OR m.owner_id = %s"
                " OR m.status IN ('pending_review', 'rejected'))"
            )
            params.append(flt.managed_by)
        if flt.member is not None:  # a user: persona proposals only when learnt from them
            where.append(
                "(m.scope <> 'persona' OR m.status NOT IN ('pending_review', 'rejected')"
                " OR m.source_user_id = %s)"
            )
            params.append(flt.member)
        if flt.exclude_personas:
            where.append("(m.scope <> 'persona' OR m.owner_id <> ALL(%s))")
            params.append(list(flt.exclude_personas))
        if flt.updated_after is not None:
            where.append("m.updated_at > %s")
            params.append(flt.updated_after)
        if flt.updated_before is not None:
            where.append("m.updated_at < %s")
            params.append(flt.updated_before)
        if flt.cursor:
            when, after_id = decode_cursor(flt.cursor)
            after = _uuid(after_id)
            if after is None:
                raise InvalidInput("cursor", "not a cursor this service issued")
            where.append("(m.created_at, m.id) < (%s, %s)")
            params += [when, after]
        params.append(flt.limit + 1)
        with self._db.tenant(ctx) as conn, conn.cursor(row_factory=dict_row) as cur:
            cur.execute(
                f"SELECT {COLUMNS} FROM memories m WHERE {' AND '.join(where)}"
                " ORDER BY m.created_at DESC, m.id DESC LIMIT %s",
                params,
            )
            rows = [_memory(r) for r in cur.fetchall()]
        page = rows[: flt.limit]
        nxt = encode_cursor(page[-1].created_at, page[-1].id) if len(rows) > flt.limit else None
        return MemoryPage(memories=page, next_cursor=nxt)

    def update(
        self,
        ctx: AccessContext,
        memory_id: str,
        change: MemoryChange,
        *,
        decided: AuditStamp | None = None,
        if_versions: frozenset[int] | None = None,
    ) -> Memory | None:
        mid = _uuid(memory_id)
        if mid is None:
            return None
        with self._db.tenant(ctx) as conn, conn.cursor(row_factory=dict_row) as cur:
            before = lock_row(cur, mid, ctx.team_id)
            if before is None:
                return None
            check_version(before, if_versions)
            if before.status is Status.REJECTED:
                raise Conflict("a rejected proposal cannot be edited; delete it instead")
            after = change_row(cur, before, self._now(), change, by_person=decided is not None)
            if after is None:
                return None
            append_memory_event(
                cur,
                "memory.updated",
                after,
                actor_id=ctx.user_id if decided else SERVICE_ACTOR,
                cause="api" if decided else "service",
                at=self._now(),
            )
            if decided is not None:
                insert_audit(cur, audit_row(decided, after.id, before, after))
                if after.status is Status.ARCHIVED and before.status is not Status.ARCHIVED:
                    insert_suppression(cur, after, decided.at)
        return after

    def review(
        self, ctx: AccessContext, memory_id: str, change: MemoryChange, *, decided: AuditStamp
    ) -> Memory | None:
        mid = _uuid(memory_id)
        if mid is None:
            return None
        with self._db.tenant(ctx) as conn, conn.cursor(row_factory=dict_row) as cur:
            before = lock_row(cur, mid, ctx.team_id)
            if before is None:
                return None
            if before.status is not Status.PENDING_REVIEW:
                raise Conflict(f"this memory was already reviewed (it is {before.status.value})")
            after = change_row(cur, before, self._now(), change, only_if=Status.PENDING_REVIEW)
            if after is None:
                raise Conflict("this memory was already reviewed")
            append_memory_event(
                cur,
                "memory.approved" if change.status is Status.ACTIVE else "memory.rejected",
                after,
                actor_id=ctx.user_id,
                cause="review",
                at=decided.at,
            )
            insert_audit(cur, audit_row(decided, after.id, before, after))
            if after.status is Status.REJECTED:
                # the value stays refused once a new value of the key replaces the row
                insert_suppression(cur, after, decided.at)
        return after

    def delete(
        self,
        ctx: AccessContext,
        memory_id: str,
        *,
        decided: AuditStamp | None = None,
        if_versions: frozenset[int] | None = None,
    ) -> bool:
        mid = _uuid(memory_id)
        if mid is None:
            return False
        with self._db.tenant(ctx) as conn, conn.cursor(row_factory=dict_row) as cur:
            if if_versions is not None:
                locked = lock_row(cur, mid, ctx.team_id)
                if locked is None:
                    return False
                check_version(locked, if_versions)
            cur.execute(
                f"DELETE FROM memories AS m WHERE m.id = %s AND m.team_id = %s RETURNING {COLUMNS}",
                (mid, ctx.team_id),
            )
            row = cur.fetchone()
            if row is None:
                return False
            before = _memory(row)
            append_memory_event(
                cur,
                "memory.deleted",
                before,
                actor_id=ctx.user_id if decided else SERVICE_ACTOR,
                cause="api" if decided else "service",
                at=decided.at if decided else self._now(),
                deleted=True,
            )
            if decided is not None:
                insert_audit(cur, audit_row(decided, before.id, before, None))
                insert_suppression(cur, before, decided.at)
        return True

    def recall(self, ctx: AccessContext, request: RecallRequest) -> list[Memory]:
        has_query = bool(request.query.strip())
        sql, params = recall_sql(
            request,
            keyword=has_query,
            vector=has_query and request.embedding is not None,
        )
        with self._db.tenant(ctx) as conn, conn.cursor(row_factory=dict_row) as cur:
            cur.execute(sql, params)
            return [_memory(r) for r in cur.fetchall()]

    def count_by_owner(self, ctx: AccessContext, scope: Scope, owner_id: str) -> int:
        with self._db.tenant(ctx) as conn:
            row = conn.execute(
                "SELECT count(*) FROM memories WHERE team_id = %s AND scope = %s AND owner_id = %s",
                (ctx.team_id, scope.value, owner_id),
            ).fetchone()
        return int(row[0]) if row else 0

    def erase_user(self, ctx: AccessContext, user_id: str) -> dict[str, int]:
        with self._db.tenant(ctx) as conn, conn.cursor(row_factory=dict_row) as cur:
            return erase_user(cur, ctx.team_id, user_id)

    def apply_retention(
        self, ctx: AccessContext, *, archive_before: datetime, delete_archived_before: datetime
    ) -> dict[str, int]:
        now = self._now()
        with self._db.tenant(ctx) as conn, conn.cursor(row_factory=dict_row) as cur:
            cur.execute(
                "DELETE FROM memories AS m WHERE m.team_id = %s AND m.status = 'archived'"
                f" AND m.updated_at < %s RETURNING {COLUMNS}",
                (ctx.team_id, delete_archived_before),
            )
            deleted = [_memory(r) for r in cur.fetchall()]
            cur.execute(
                "UPDATE memories AS m SET status = 'archived', updated_at = %s"
                " WHERE m.team_id = %s AND m.status = 'active' AND m.updated_at < %s"
                f" RETURNING {COLUMNS}",
                (now, ctx.team_id, archive_before),
            )
            archived = [_memory(r) for r in cur.fetchall()]
            for gone in deleted:
                append_memory_event(
                    cur,
                    "memory.deleted",
                    gone,
                    actor_id=SERVICE_ACTOR,
                    cause="service",
                    at=now,
                    deleted=True,
                )
            for changed in archived:
                append_memory_event(
                    cur, "memory.updated", changed, actor_id=SERVICE_ACTOR, cause="service", at=now
                )
        return {"archived": len(archived), "deleted": len(deleted)}

    def list_actions(self, ctx: AccessContext, memory_id: str) -> list[ReviewAction]:
        mid = _uuid(memory_id)
        if mid is None:
            return []
        with self._db.tenant(ctx) as conn, conn.cursor(row_factory=dict_row) as cur:
            cur.execute(
                "SELECT * FROM review_actions WHERE team_id = %s AND memory_id = %s ORDER BY seq",
                (ctx.team_id, mid),
            )
            return [action_from_row(r) for r in cur.fetchall()]
