# ruff: noqa: S608 - SQL is composed only from constants in this module; values are bound.
"""``PostgresTx``: one tenant transaction (``engram.memories.ports.MemoryTx``) on the cursor
``PostgresMemoryStore`` opens for it. Row-level security filters every statement; the
explicit team/owner predicates are there for the indexes."""

from __future__ import annotations

import uuid
from collections.abc import Iterator
from contextlib import contextmanager
from datetime import datetime
from typing import Any

from psycopg import Cursor

from engram.adapters.postgres import changes, erasures, merges, personas, saving, versions
from engram.adapters.postgres.lifecycle import (
    IDENTITY,
    ON_KEY,
    canonical_column,
    change_row,
    erase_user,
    insert_audit,
    insert_suppression,
    lock_quotas,
)
from engram.adapters.postgres.outbox import append_memory_event
from engram.adapters.postgres.recall import recall_sql
from engram.adapters.postgres.rows import COLUMNS, action_from_row, as_uuid, memory_from_row
from engram.adapters.postgres.rows import vector_literal as _vector
from engram.errors import Conflict, InvalidInput
from engram.events.models import SERVICE_ACTOR, Cause, MemoryEventType
from engram.memories.changes import ChangeProposal
from engram.memories.cursors import decode_cursor, encode_cursor
from engram.memories.keys import canonical_key
from engram.memories.lifecycle import QuotaSubject, suppression_digests
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
from engram.memories.ports import AccessContext, KeyRow, MemoryChange, MemoryTx, Switches
from engram.memories.versions import MAINTENANCE, MemoryVersion, VersionPage, version_of

_INSERT = f"{saving.INSERT_ROW} {ON_KEY} DO NOTHING RETURNING {COLUMNS}"
#: a deleted memory back under its id and version (restore)
_REVIVE = (
    "INSERT INTO memories AS m (id, team_id, scope, owner_id, user_id, key, key_canonical,"
    " value, source_user_id, confidence, status, created_at, updated_at, version) VALUES"
    " (%(id)s, %(team)s, %(scope)s, %(owner)s, %(user)s, %(key)s, %(canonical)s, %(value)s,"
    f" %(source)s, 1.0, %(status)s, %(created)s, %(now)s, %(version)s) {ON_KEY} DO NOTHING"
    f" RETURNING {COLUMNS}"
)
_OVERWRITE = (
    "UPDATE memories AS m SET value = %(value)s, confidence = %(confidence)s,"
    " status = %(status)s, source_channel_id = %(channel)s, source_user_id = %(source)s,"
    " embedding = %(embedding)s::vector, embedding_model = %(embedding_model)s,"
    " embedding_dims = %(embedding_dims)s, updated_at = GREATEST(%(now)s, m.updated_at),"
    f" edited_at = NULL WHERE m.id = %(row)s AND m.team_id = %(team)s RETURNING {COLUMNS}"
)


def row_values(memory: NewMemory, now: datetime) -> dict[str, Any]:
    """A new row's columns as statement parameters."""
    return {
        "id": uuid.uuid4(),
        "team": memory.team_id,
        "scope": memory.scope.value,
        "owner": memory.owner_id,
        "user": memory.user_id,
        "key": memory.key,
        "canonical": canonical_column(memory.key),
        "value": memory.value,
        "channel": memory.source_channel_id,
        "source": memory.source_user_id,
        "confidence": memory.confidence,
        "status": memory.status.value,
        "embedding": _vector(memory.embedding),
        "embedding_model": memory.embedding_model,
        "embedding_dims": len(memory.embedding) if memory.embedding is not None else None,
        "now": now,
    }


def filter_sql(flt: MemoryFilter, position: str = "m") -> tuple[list[str], list[Any]]:
    """The conditions of ``flt`` on the memories ``m`` (its ``status`` only when given) and
    its cursor on ``position``'s (``created_at``, id): a page's rows (``m``) or changes."""
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
            "(m.scope <> 'user' OR m.owner_id = %s OR m.status IN ('pending_review', 'rejected'))"
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
        after = as_uuid(after_id)
        if after is None:
            raise InvalidInput("cursor", "not a cursor this service issued")
        where.append(f"({position}.created_at, {position}.id) < (%s, %s)")
        params += [when, after]
    return where, params


def listing_sql(flt: MemoryFilter) -> tuple[str, list[Any]]:
    """One page of ``flt`` (one row more than the page, to know whether another follows)."""
    where, params = filter_sql(flt)
    params.append(flt.limit + 1)
    return (
        f"SELECT {COLUMNS} FROM memories m WHERE {' AND '.join(where)}"
        " ORDER BY m.created_at DESC, m.id DESC LIMIT %s",
        params,
    )


class PostgresTx(MemoryTx):
    """The statements of one unit of work, on its cursor (a ``dict_row`` cursor)."""

    def __init__(self, cur: Cursor[Any], ctx: AccessContext, now: datetime) -> None:
        self._cur = cur
        self._ctx = ctx
        self._now = now

    @property
    def ctx(self) -> AccessContext:
        return self._ctx

    @property
    def now(self) -> datetime:
        return self._now

    def _one(self, sql: str, params: Any) -> dict[str, Any] | None:
        self._cur.execute(sql, params)
        row: dict[str, Any] | None = self._cur.fetchone()
        return row

    # --- settings -------------------------------------------------------------------------
    def switches(self, persona_id: str | None) -> Switches:
        return personas.read_switches(self._cur, self._ctx.team_id, persona_id)

    def personas(self) -> list[Persona]:
        return personas.list_personas(self._cur, self._ctx.team_id)

    def put_persona(self, persona: Persona) -> Persona:
        return personas.put_persona(self._cur, persona, self._now)

    def put_team_settings(self, settings: TeamSettings) -> TeamSettings:
        return personas.put_team_settings(self._cur, self._ctx, settings, self._now)

    # --- reads ----------------------------------------------------------------------------
    def _by_id(self, memory_id: str, lock: str) -> Memory | None:
        mid = as_uuid(memory_id)
        if mid is None:
            return None
        row = self._one(
            f"SELECT {COLUMNS} FROM memories m WHERE m.id = %s AND m.team_id = %s{lock}",
            (mid, self._ctx.team_id),
        )
        return memory_from_row(row) if row else None

    def get(self, memory_id: str) -> Memory | None:
        return self._by_id(memory_id, "")

    def lock(self, memory_id: str) -> Memory | None:
        return self._by_id(memory_id, " FOR UPDATE")

    def lock_key(self, scope: Scope, owner_id: str, user_id: str | None, key: str) -> KeyRow | None:
        row = self._one(
            f"SELECT {COLUMNS}, m.edited_at IS NOT NULL AS edited FROM memories m"
            " WHERE m.team_id = %s AND m.scope = %s AND m.owner_id = %s"
            f" AND COALESCE(m.user_id, '') = %s AND {IDENTITY} = %s FOR UPDATE",
            (self._ctx.team_id, scope.value, owner_id, user_id or "", canonical_key(key)),
        )
        return None if row is None else KeyRow(memory_from_row(row), bool(row["edited"]))

    def get_change(self, change_id: str) -> ChangeProposal | None:
        return changes.get_change(self._cur, self._ctx.team_id, change_id)

    def change_for(self, memory_id: str) -> ChangeProposal | None:
        return changes.change_for(self._cur, self._ctx.team_id, memory_id)

    def list_changes(self, flt: MemoryFilter) -> list[tuple[ChangeProposal, Memory]]:
        where, params = filter_sql(flt.model_copy(update={"status": None}), position="c")
        return changes.list_changes(self._cur, flt, where, params)

    def nearest(
        self, memory: Memory, model_id: str, embedding: list[float] | None = None
    ) -> tuple[Memory, float] | None:
        return merges.nearest(self._cur, memory, model_id, embedding)

    def fold(self, row: Memory, into: Memory) -> Memory:
        return merges.fold(self._cur, row, into, self._now)

    def put_change(self, change: ChangeProposal) -> None:
        changes.put_change(self._cur, change)

    def list_memories(self, flt: MemoryFilter) -> MemoryPage:
        sql, params = listing_sql(flt)
        self._cur.execute(sql, params)
        rows = [memory_from_row(r) for r in self._cur.fetchall()]
        page = rows[: flt.limit]
        nxt = encode_cursor(page[-1].created_at, page[-1].id) if len(rows) > flt.limit else None
        return MemoryPage(memories=page, next_cursor=nxt)

    def recall(self, request: RecallRequest) -> list[Memory]:
        has_query = bool(request.query.strip())
        sql, params = recall_sql(
            request, keyword=has_query, vector=has_query and request.embedding is not None
        )
        self._cur.execute(sql, params)
        return [memory_from_row(r) for r in self._cur.fetchall()]

    def count_by_owner(self, scope: Scope, owner_id: str) -> int:
        row = self._one(
            "SELECT count(*) AS n FROM memories WHERE team_id = %s AND scope = %s"
            " AND owner_id = %s",
            (self._ctx.team_id, scope.value, owner_id),
        )
        return int(row["n"]) if row else 0

    def list_actions(self, memory_id: str) -> list[ReviewAction]:
        mid = as_uuid(memory_id)
        if mid is None:
            return []
        self._cur.execute(
            "SELECT * FROM review_actions WHERE team_id = %s AND memory_id = %s ORDER BY seq",
            (self._ctx.team_id, mid),
        )
        return [action_from_row(r) for r in self._cur.fetchall()]

    def usage(self, subjects: list[QuotaSubject]) -> dict[str, int]:
        return lock_quotas(self._cur, self._ctx.team_id, subjects)

    def suppressed(self, memory: NewMemory) -> bool:
        row = self._one(
            "SELECT EXISTS (SELECT 1 FROM memory_suppressions s WHERE s.team_id = %s"
            " AND s.scope = %s AND s.owner_id = %s AND s.user_key = %s"
            " AND s.digest = ANY(%s)) AS held",
            (
                memory.team_id,
                memory.scope.value,
                memory.owner_id,
                memory.user_id or "",
                suppression_digests(memory.key, memory.value),
            ),
        )
        return bool(row and row["held"])

    def version(self, memory_id: str, number: int | None) -> MemoryVersion | None:
        return versions.one(self._cur, self._ctx.team_id, memory_id, number)

    def versions(self, memory_id: str, *, after: int, limit: int) -> VersionPage:
        return versions.page(self._cur, self._ctx.team_id, memory_id, after, limit)

    def version_at(self, memory_id: str, at: datetime) -> MemoryVersion | None:
        return versions.at(self._cur, self._ctx.team_id, memory_id, at)

    def versions_current_at(self, request: RecallRequest, at: datetime) -> list[MemoryVersion]:
        return versions.current_at(self._cur, request, at)

    def erased_since(self, user_id: str, since_ms: int) -> bool:
        return erasures.erased_since(self._cur, self._ctx.team_id, user_id, since_ms, hold=True)

    # --- writes ---------------------------------------------------------------------------
    def save(self, memory: NewMemory) -> tuple[Memory, bool, bool] | None:
        values = row_values(memory, self._now)
        row = self._one(
            saving.SAVE_UNLESS_REJECTED_SQL,
            saving.save_params(values, memory, actor_id=self._ctx.user_id),
        )
        if row is not None:
            return memory_from_row(row), bool(row["created"]), True
        # nothing written: the key's row is rejected, or already holds this value
        held = self.lock_key(memory.scope, memory.owner_id, memory.user_id, memory.key)
        if held is None or held.memory.status is Status.REJECTED:
            return None
        return held.memory, False, False

    def insert(self, memory: NewMemory) -> Memory | None:
        row = self._one(_INSERT, row_values(memory, self._now))
        return memory_from_row(row) if row else None

    def overwrite(self, row: Memory, memory: NewMemory) -> Memory:
        params = row_values(memory, self._now) | {"row": uuid.UUID(row.id)}
        written = self._one(_OVERWRITE, params)
        assert written is not None, "the row is locked by this transaction"
        return memory_from_row(written)

    def change(self, row: Memory, change: MemoryChange, *, edited: bool = False) -> Memory | None:
        return change_row(self._cur, row, self._now, change, by_person=edited)

    def revive(self, memory: Memory) -> Memory:
        values = row_values(NewMemory(**memory.internal_fields()), self._now)
        kept = {"id": uuid.UUID(memory.id), "created": memory.created_at, "version": memory.version}
        row = self._one(_REVIVE, values | kept)
        if row is None:
            raise Conflict("a memory with this key already exists in this scope")
        return memory_from_row(row)

    def forget_versions(self, memory_id: str) -> None:
        self._cur.execute(
            "DELETE FROM memory_versions WHERE team_id = %s AND memory_id = %s",
            (self._ctx.team_id, uuid.UUID(memory_id)),
        )

    def record_version(self, version: MemoryVersion) -> None:
        versions.record(self._cur, version)

    def remove(self, memory_id: str) -> Memory | None:
        mid = as_uuid(memory_id)
        if mid is None:
            return None
        row = self._one(
            f"DELETE FROM memories AS m WHERE m.id = %s AND m.team_id = %s RETURNING {COLUMNS}",
            (mid, self._ctx.team_id),
        )
        return memory_from_row(row) if row else None

    def publish(
        self,
        event_type: MemoryEventType,
        memory: Memory,
        *,
        actor_id: str,
        cause: Cause,
        deleted: bool = False,
        into: str | None = None,
    ) -> None:
        append_memory_event(
            self._cur,
            event_type,
            memory,
            actor_id=actor_id,
            cause=cause,
            at=self._now,
            deleted=deleted,
            into=into,
        )

    def audit(self, action: ReviewAction) -> None:
        insert_audit(self._cur, action)

    def suppress(self, memory: Memory) -> None:
        insert_suppression(self._cur, memory, self._now)

    @contextmanager
    def savepoint(self) -> Iterator[None]:
        self._cur.execute("SAVEPOINT engram_step")
        try:
            yield
        except BaseException:
            self._cur.execute("ROLLBACK TO SAVEPOINT engram_step")
            raise
        self._cur.execute("RELEASE SAVEPOINT engram_step")

    # --- bulk -----------------------------------------------------------------------------
    def record_erasure(self, user_id: str, at_ms: int) -> None:
        erasures.record_erasure(self._cur, self._ctx.team_id, user_id, at_ms)

    def erase_user(self, user_id: str) -> dict[str, int]:
        return erase_user(self._cur, self._ctx.team_id, user_id)

    def apply_retention(
        self, *, archive_before: datetime, delete_archived_before: datetime
    ) -> dict[str, int]:
        cur, team = self._cur, self._ctx.team_id
        cur.execute(
            "DELETE FROM memories AS m WHERE m.team_id = %s AND m.status = 'archived'"
            f" AND m.updated_at < %s RETURNING {COLUMNS}",
            (team, delete_archived_before),
        )
        deleted = [memory_from_row(r) for r in cur.fetchall()]
        cur.execute(
            "UPDATE memories AS m SET status = 'archived', updated_at = %s"
            " WHERE m.team_id = %s AND m.status = 'active' AND m.updated_at < %s"
            f" RETURNING {COLUMNS}",
            (self._now, team, archive_before),
        )
        archived = [memory_from_row(r) for r in cur.fetchall()]
        for gone in deleted:
            self.publish(
                "memory.deleted", gone, actor_id=SERVICE_ACTOR, cause="service", deleted=True
            )
            self.record_version(version_of(gone, MAINTENANCE, self._now, deleted=True))
        for changed in archived:
            self.publish("memory.updated", changed, actor_id=SERVICE_ACTOR, cause="service")
            self.record_version(version_of(changed, MAINTENANCE, self._now))
        return {"archived": len(archived), "deleted": len(deleted)}


__all__ = ["PostgresTx", "listing_sql", "row_values"]
