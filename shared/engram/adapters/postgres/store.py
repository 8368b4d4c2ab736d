# ruff: noqa: S608 - SQL is composed only from constants in this module; values are bound.
"""``PostgresMemoryStore``: MemoryStore + PersonaStore on PostgreSQL with pgvector.

Every call runs in one transaction as the application role with the tenant in
transaction-local settings (see ``pool.Database.tenant``), so row-level security filters
every statement; the explicit team/owner predicates below are there for the indexes.
"""

from __future__ import annotations

import uuid
from collections.abc import Sequence
from datetime import UTC, datetime
from typing import Any

from psycopg import errors as pg_errors
from psycopg.rows import dict_row
from psycopg.types.json import Jsonb

from engram.adapters.inmemory_memories import decode_cursor, encode_cursor
from engram.adapters.postgres.pool import Database
from engram.clock import Clock, SystemClock
from engram.errors import Conflict, InvalidInput
from engram.memories.inputs import ExtractionConfig, RetentionRule
from engram.memories.models import (
    ERASED_ACTOR,
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
from engram.memories.ports import AccessContext, Embedder
from engram.memories.recall import CANDIDATES_PER_LIST, MIN_SIMILARITY, RRF_K, TEXT_SEARCH_CONFIG
from engram.memories.service import MemoryService
from engram.settings import Settings

COLUMNS = (
    "m.id, m.team_id, m.scope, m.owner_id, m.user_id, m.key, m.value, m.source_channel_id, "
    "m.confidence, m.status, m.created_at, m.updated_at"
)
ORDER_TIES = "m.confidence DESC, m.updated_at DESC, m.id"


def _uuid(memory_id: str) -> uuid.UUID | None:
    try:
        return uuid.UUID(memory_id)
    except (ValueError, AttributeError, TypeError):
        return None


def _vector(values: Sequence[float] | None) -> str | None:
    if values is None:
        return None
    return "[" + ",".join(repr(float(v)) for v in values) + "]"


def _memory(row: dict[str, Any]) -> Memory:
    return Memory(
        id=str(row["id"]),
        team_id=row["team_id"],
        scope=Scope(row["scope"]),
        owner_id=row["owner_id"],
        user_id=row["user_id"],
        key=row["key"],
        value=row["value"],
        source_channel_id=row["source_channel_id"],
        confidence=float(row["confidence"]),
        status=Status(row["status"]),
        created_at=row["created_at"].astimezone(UTC),
        updated_at=row["updated_at"].astimezone(UTC),
    )


def recall_sql(
    request: RecallRequest, *, keyword: bool, vector: bool
) -> tuple[str, dict[str, Any]]:
    """The one recall statement (documented order in ``engram.memories.recall``)."""
    params: dict[str, Any] = {
        "team": request.team_id,
        "user": request.user_id,
        "persona": request.persona_id,
        "limit": request.limit,
        "query": request.query,
        "cfg": TEXT_SEARCH_CONFIG,
        "emb": _vector(request.embedding),
        "maxdist": 1.0 - MIN_SIMILARITY,
        "cands": CANDIDATES_PER_LIST,
        "k": RRF_K,
    }
    scopes = "(m.scope = 'user' AND m.owner_id = %(user)s)"
    shadow = ""
    if request.persona_id is not None:
        scopes = (
            "((m.scope = 'user' AND m.owner_id = %(user)s)"
            " OR (m.scope = 'persona' AND m.owner_id = %(persona)s)"
            " OR (m.scope = 'persona_user' AND m.owner_id = %(persona)s"
            " AND m.user_id = %(user)s))"
        )
        shadow = (
            " AND NOT (m.scope <> 'persona_user' AND EXISTS (SELECT 1 FROM memories h"
            " WHERE h.team_id = m.team_id AND h.scope = 'persona_user'"
            " AND h.owner_id = %(persona)s AND COALESCE(h.user_id, '') = %(user)s"
            " AND h.key = m.key AND h.status = 'active'))"
            " AND NOT (m.scope = 'user' AND EXISTS (SELECT 1 FROM memories h"
            " WHERE h.team_id = m.team_id AND h.scope = 'persona'"
            " AND h.owner_id = %(persona)s AND COALESCE(h.user_id, '') = ''"
            " AND h.key = m.key AND h.status = 'active'))"
        )
    visible = f"m.team_id = %(team)s AND m.status = 'active' AND {scopes}{shadow}"
    tsq = (
        "replace(plainto_tsquery(%(cfg)s::regconfig, engram_fts_text(%(query)s))::text,"
        " ' & ', ' | ')::tsquery"
    )
    if not keyword and not vector:
        return (
            f"SELECT {COLUMNS} FROM memories m WHERE {visible} "
            f"ORDER BY {ORDER_TIES} LIMIT %(limit)s",
            params,
        )
    if keyword and not vector:
        # one ranked list: its RRF order is its own order
        return (
            f"SELECT {COLUMNS} FROM engram_fts_match({tsq}, %(persona)s) c"
            f" JOIN memories m ON m.id = c.id WHERE {visible}"
            f" ORDER BY c.rank DESC, {ORDER_TIES} LIMIT %(limit)s",
            params,
        )
    lists = []
    ctes = []
    if keyword:
        ctes.append(f"q AS (SELECT {tsq} AS tsq)")
        ctes.append(
            "kw AS (SELECT m.id, row_number() OVER (ORDER BY c.rank DESC, "
            f"{ORDER_TIES}) AS r FROM q, engram_fts_match(q.tsq, %(persona)s) c"
            f" JOIN memories m ON m.id = c.id WHERE {visible} ORDER BY r LIMIT %(cands)s)"
        )
        lists.append("SELECT id, r FROM kw")
    if vector:
        ctes.append(
            "vec AS (SELECT m.id, row_number() OVER (ORDER BY m.embedding <=> %(emb)s::vector, "
            f"{ORDER_TIES}) AS r FROM memories m WHERE {visible} AND m.embedding IS NOT NULL "
            "AND (m.embedding <=> %(emb)s::vector) <= %(maxdist)s ORDER BY r LIMIT %(cands)s)"
        )
        lists.append("SELECT id, r FROM vec")
    ctes.append(
        "fused AS (SELECT id, sum(1.0 / (%(k)s + r)) AS score FROM ("
        + " UNION ALL ".join(lists)
        + ") u GROUP BY id)"
    )
    sql = (
        "WITH "
        + ", ".join(ctes)
        + f" SELECT {COLUMNS} FROM fused f JOIN memories m ON m.id = f.id "
        f"ORDER BY f.score DESC, {ORDER_TIES} LIMIT %(limit)s"
    )
    return sql, params


class PostgresMemoryStore:
    def __init__(self, db: Database, clock: Clock | None = None) -> None:
        self._db = db
        self._clock = clock or SystemClock()

    def _now(self) -> datetime:
        return datetime.fromtimestamp(self._clock.now_ms() / 1000, UTC)

    # --- MemoryStore ------------------------------------------------------------------------
    def upsert(self, ctx: AccessContext, memory: NewMemory) -> tuple[Memory, bool]:
        written = self._upsert(ctx, memory, None)
        assert written is not None
        return written

    def upsert_unless_erased(
        self, ctx: AccessContext, memory: NewMemory, *, user_id: str, since_ms: int
    ) -> tuple[Memory, bool] | None:
        """``upsert``, unless the erasure log (table ``erasures``) holds an erasure of
        (``ctx.team_id``, ``user_id``) at or after ``since_ms``: then nothing is written and
        the answer is ``None``. The check and the write are one statement. ``ctx`` must be
        able to read that erasure under RLS (the user themself, or elevated in the team)."""
        return self._upsert(ctx, memory, (user_id, since_ms))

    def _upsert(
        self, ctx: AccessContext, memory: NewMemory, unless_erased: tuple[str, int] | None
    ) -> tuple[Memory, bool] | None:
        now = self._now()
        values = (
            uuid.uuid4(),
            memory.team_id,
            memory.scope.value,
            memory.owner_id,
            memory.user_id,
            memory.key,
            memory.value,
            memory.source_channel_id,
            memory.confidence,
            memory.status.value,
            _vector(memory.embedding),
            now,
            now,
        )
        guard = ""
        params: tuple[Any, ...] = values
        if unless_erased is not None:
            user_id, since_ms = unless_erased
            guard = (
                " WHERE NOT EXISTS (SELECT 1 FROM erasures e WHERE e.team_id = %s"
                " AND e.user_id = %s AND e.erased_at >= %s)"
            )
            since = datetime.fromtimestamp(since_ms / 1000, UTC)
            params = (*values, ctx.team_id, user_id, since)
        with self._db.tenant(ctx) as conn, conn.cursor(row_factory=dict_row) as cur:
            cur.execute(
                "INSERT INTO memories AS m (id, team_id, scope, owner_id, user_id, key, value,"
                " source_channel_id, confidence, status, embedding, created_at, updated_at)"
                " SELECT %s, %s, %s, %s, %s, %s, %s, %s, %s, %s, %s::vector, %s::timestamptz,"
                f" %s::timestamptz{guard}"
                " ON CONFLICT (team_id, scope, owner_id, COALESCE(user_id, ''), key) DO UPDATE"
                " SET value = EXCLUDED.value, confidence = EXCLUDED.confidence,"
                " status = EXCLUDED.status, source_channel_id = EXCLUDED.source_channel_id,"
                " embedding = EXCLUDED.embedding,"
                " updated_at = GREATEST(EXCLUDED.updated_at, m.updated_at)"
                f" RETURNING {COLUMNS}, (xmax = 0) AS created",
                params,
            )
            row = cur.fetchone()
        if row is None:
            return None
        return _memory(row), bool(row["created"])

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
                " AND m.owner_id = %s AND COALESCE(m.user_id, '') = %s AND m.key = %s",
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
        ):
            if value is not None:
                where.append(f"{column} = %s")
                params.append(value)
        if flt.persona_id is not None:
            where.append("m.scope IN ('persona', 'persona_user') AND m.owner_id = %s")
            params.append(flt.persona_id)
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
        *,
        key: str | None = None,
        value: str | None = None,
        confidence: float | None = None,
        status: Status | None = None,
        embedding: list[float] | None = None,
    ) -> Memory | None:
        mid = _uuid(memory_id)
        if mid is None:
            return None
        sets = ["updated_at = GREATEST(%s, m.updated_at)"]
        params: list[Any] = [self._now()]
        for column, val in (
            ("key", key),
            ("value", value),
            ("confidence", confidence),
            ("status", status.value if status else None),
        ):
            if val is not None:
                sets.append(f"{column} = %s")
                params.append(val)
        if embedding is not None:
            sets.append("embedding = %s::vector")
            params.append(_vector(embedding))
        params += [mid, ctx.team_id]
        try:
            with self._db.tenant(ctx) as conn, conn.cursor(row_factory=dict_row) as cur:
                cur.execute(
                    f"UPDATE memories AS m SET {', '.join(sets)} WHERE m.id = %s"
                    f" AND m.team_id = %s RETURNING {COLUMNS}",
                    params,
                )
                row = cur.fetchone()
        except pg_errors.UniqueViolation as exc:
            raise Conflict("a memory with this key already exists in this scope") from exc
        return _memory(row) if row else None

    def delete(self, ctx: AccessContext, memory_id: str) -> bool:
        mid = _uuid(memory_id)
        if mid is None:
            return False
        with self._db.tenant(ctx) as conn:
            cur = conn.execute(
                "DELETE FROM memories WHERE id = %s AND team_id = %s", (mid, ctx.team_id)
            )
            return cur.rowcount > 0

    def archive(self, ctx: AccessContext, memory_id: str) -> Memory | None:
        return self.update(ctx, memory_id, status=Status.ARCHIVED)

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
        counts = {Scope.USER.value: 0, Scope.PERSONA_USER.value: 0}
        with self._db.tenant(ctx) as conn:
            rows = conn.execute(
                "DELETE FROM memories WHERE team_id = %s AND ((scope = 'user' AND owner_id = %s)"
                " OR (scope = 'persona_user' AND user_id = %s)) RETURNING scope, id",
                (ctx.team_id, user_id, user_id),
            ).fetchall()
            # The audit (admins only under RLS, migration 0004): in the same transaction, as an
            # admin of this team, drop the rows about the user's memories (they hold copies of
            # the values) and take the user's id off the rows where they acted on others.
            conn.execute("SELECT set_config('engram.is_admin', 'on', true)")
            conn.execute(
                "DELETE FROM review_actions r WHERE r.team_id = %s"
                " AND (r.memory_id = ANY(%s::uuid[])"
                " OR r.memory_id IN (SELECT a.memory_id FROM review_actions a"
                " CROSS JOIN LATERAL (VALUES (a.before), (a.after)) AS c(copy)"
                " WHERE a.team_id = %s AND ((c.copy->>'scope' = 'user'"
                " AND c.copy->>'ownerId' = %s) OR (c.copy->>'scope' = 'persona_user'"
                " AND c.copy->>'userId' = %s))))",
                (ctx.team_id, [mid for _, mid in rows], ctx.team_id, user_id, user_id),
            )
            conn.execute(
                "UPDATE review_actions SET actor_id = %s WHERE team_id = %s AND actor_id = %s",
                (ERASED_ACTOR, ctx.team_id, user_id),
            )
        for scope, _ in rows:
            counts[scope] += 1
        return counts

    def apply_retention(
        self, ctx: AccessContext, *, archive_before: datetime, delete_archived_before: datetime
    ) -> dict[str, int]:
        with self._db.tenant(ctx) as conn:
            deleted = conn.execute(
                "DELETE FROM memories WHERE team_id = %s AND status = 'archived'"
                " AND updated_at < %s",
                (ctx.team_id, delete_archived_before),
            ).rowcount
            archived = conn.execute(
                "UPDATE memories SET status = 'archived', updated_at = %s WHERE team_id = %s"
                " AND status = 'active' AND updated_at < %s",
                (self._now(), ctx.team_id, archive_before),
            ).rowcount
        return {"archived": archived, "deleted": deleted}

    def record_action(self, ctx: AccessContext, action: ReviewAction) -> None:
        with self._db.tenant(ctx) as conn:
            conn.execute(
                "INSERT INTO review_actions (id, team_id, memory_id, actor_id, action, before,"
                " after, at) VALUES (%s, %s, %s, %s, %s, %s, %s, %s)",
                (
                    uuid.UUID(action.id),
                    action.team_id,
                    uuid.UUID(action.memory_id),
                    action.actor_id,
                    action.action,
                    Jsonb(action.before) if action.before is not None else None,
                    Jsonb(action.after) if action.after is not None else None,
                    action.at,
                ),
            )

    def list_actions(self, ctx: AccessContext, memory_id: str) -> list[ReviewAction]:
        mid = _uuid(memory_id)
        if mid is None:
            return []
        with self._db.tenant(ctx) as conn, conn.cursor(row_factory=dict_row) as cur:
            cur.execute(
                "SELECT * FROM review_actions WHERE team_id = %s AND memory_id = %s ORDER BY seq",
                (ctx.team_id, mid),
            )
            return [
                ReviewAction(
                    id=str(r["id"]),
                    team_id=r["team_id"],
                    memory_id=str(r["memory_id"]),
                    actor_id=r["actor_id"],
                    action=r["action"],
                    before=r["before"],
                    after=r["after"],
                    at=r["at"],
                )
                for r in cur.fetchall()
            ]

    # --- PersonaStore -----------------------------------------------------------------------
    def get_persona(self, ctx: AccessContext, persona_id: str) -> Persona | None:
        with self._db.tenant(ctx) as conn, conn.cursor(row_factory=dict_row) as cur:
            cur.execute(
                "SELECT * FROM personas WHERE team_id = %s AND persona_id = %s",
                (ctx.team_id, persona_id),
            )
            r = cur.fetchone()
        if r is None:
            return None
        return Persona(
            persona_id=r["persona_id"],
            team_id=r["team_id"],
            allowed_groups=list(r["allowed_groups"]),
            memory_enabled=r["memory_enabled"],
            extraction=ExtractionConfig(
                enabled=r["extraction_enabled"], prompt=r["extraction_prompt"]
            ),
            retention=RetentionRule(
                archive_after_days=r["archive_after_days"],
                delete_archived_after_days=r["delete_archived_after_days"],
            ),
            updated_at=r["updated_at"],
        )

    def put_persona(self, ctx: AccessContext, persona: Persona) -> Persona:
        now = self._now()
        with self._db.tenant(ctx) as conn:
            conn.execute(
                "INSERT INTO personas (team_id, persona_id, allowed_groups, memory_enabled,"
                " extraction_enabled, extraction_prompt, archive_after_days,"
                " delete_archived_after_days, updated_at)"
                " VALUES (%s, %s, %s, %s, %s, %s, %s, %s, %s)"
                " ON CONFLICT (team_id, persona_id) DO UPDATE"
                " SET allowed_groups = EXCLUDED.allowed_groups,"
                " memory_enabled = EXCLUDED.memory_enabled,"
                " extraction_enabled = EXCLUDED.extraction_enabled,"
                " extraction_prompt = EXCLUDED.extraction_prompt,"
                " archive_after_days = EXCLUDED.archive_after_days,"
                " delete_archived_after_days = EXCLUDED.delete_archived_after_days,"
                " updated_at = EXCLUDED.updated_at",
                (
                    persona.team_id,
                    persona.persona_id,
                    list(persona.allowed_groups),
                    persona.memory_enabled,
                    persona.extraction.enabled,
                    persona.extraction.prompt,
                    persona.retention.archive_after_days,
                    persona.retention.delete_archived_after_days,
                    now,
                ),
            )
        return persona.model_copy(update={"updated_at": now})

    def get_team_settings(self, ctx: AccessContext) -> TeamSettings | None:
        with self._db.tenant(ctx) as conn:
            r = conn.execute(
                "SELECT memory_enabled, updated_at, archive_after_days, delete_archived_after_days"
                " FROM team_settings WHERE team_id = %s",
                (ctx.team_id,),
            ).fetchone()
        if r is None:
            return None
        return TeamSettings(
            team_id=ctx.team_id,
            memory_enabled=r[0],
            updated_at=r[1],
            retention=RetentionRule(archive_after_days=r[2], delete_archived_after_days=r[3]),
        )

    def put_team_settings(self, ctx: AccessContext, settings: TeamSettings) -> TeamSettings:
        now = self._now()
        with self._db.tenant(ctx) as conn:
            conn.execute(
                "INSERT INTO team_settings (team_id, memory_enabled, archive_after_days,"
                " delete_archived_after_days, updated_at)"
                " VALUES (%s, %s, %s, %s, %s) ON CONFLICT (team_id) DO UPDATE"
                " SET memory_enabled = EXCLUDED.memory_enabled,"
                " archive_after_days = EXCLUDED.archive_after_days,"
                " delete_archived_after_days = EXCLUDED.delete_archived_after_days,"
                " updated_at = EXCLUDED.updated_at",
                (
                    settings.team_id,
                    settings.memory_enabled,
                    settings.retention.archive_after_days,
                    settings.retention.delete_archived_after_days,
                    now,
                ),
            )
        return settings.model_copy(update={"updated_at": now})


def build_memory_service(
    settings: Settings,
    *,
    conninfo: str | None = None,
    clock: Clock | None = None,
    embedder: Embedder | None = None,
) -> tuple[MemoryService, Database]:
    """Compose a ``MemoryService`` on PostgreSQL from settings (for a composition root).

    ``conninfo`` defaults to ``ENGRAM_DATABASE_URL``; the embedder to the configured one
    (``ENGRAM_EMBEDDER``: none or bedrock). Nothing connects until the first call. Close the
    returned ``Database`` on shutdown."""
    db = Database.from_settings(settings, conninfo)
    store = PostgresMemoryStore(db, clock)
    if embedder is None and settings.embedder == "bedrock":
        from engram.adapters.bedrock_embedder import BedrockTitanEmbedder

        embedder = BedrockTitanEmbedder.from_settings(settings)
    service = MemoryService(store, store, embedder=embedder, settings=settings, clock=clock)
    return service, db
