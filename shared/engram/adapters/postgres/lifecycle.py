# ruff: noqa: S608 - SQL is composed only from constants in this module; values are bound.
"""The memory lifecycle on PostgreSQL: statements a unit of work (``PostgresTx``) runs
(migration 0007).

* Quotas: the counters of ``memory_usage`` are kept exact by statement-level triggers on
  ``memories``. A write that may create a row first takes a transaction-scoped advisory lock
  per limited counter (team, then persona, then user: one order, so no deadlock), then reads
  the counters. Every writer that adds rows takes those locks, so two saves at the limit
  cannot both pass; deletes only lower a counter and need none.
* The audit row and the suppression of a person's decision are written in the transaction of
  the change.
"""

from __future__ import annotations

import uuid
from datetime import datetime
from typing import Any

from psycopg import Cursor
from psycopg import errors as pg_errors
from psycopg.types.json import Jsonb

from engram.adapters.postgres.changes import erase_changes
from engram.adapters.postgres.rows import COLUMNS, memory_from_row, vector_literal
from engram.errors import Conflict
from engram.memories.keys import canonical_key
from engram.memories.lifecycle import QuotaSubject, suppression_digest
from engram.memories.models import ERASED_ACTOR, Memory, ReviewAction, Scope
from engram.memories.ports import MemoryChange

#: advisory lock class of the quota counters (the 2-key form; ``engram migrate`` uses 1 key)
QUOTA_LOCK_CLASS = 0x454E47

#: A key's identity as a row holds it (migration 0017): ``key_canonical`` is the canonical
#: key where it differs from ``key``, else NULL, so rows whose key is already canonical (most)
#: were not rewritten by the migration.
IDENTITY = "COALESCE(m.key_canonical, m.key)"

#: the arbiter of a key's one row, however it is spelt (``memories_key``, migration 0018);
#: the previous release's upserts name ``memories_dedup`` (exact keys), which stays beside it
#: for them (see docs/deployment.md)
ON_KEY = (
    "ON CONFLICT (team_id, scope, owner_id, COALESCE(user_id, ''), COALESCE(key_canonical, key))"
)


def canonical_column(key: str) -> str | None:
    """What ``key_canonical`` holds for ``key`` (see ``IDENTITY``)."""
    canon = canonical_key(key)
    return None if canon == key else canon


def lock_quotas(cur: Cursor[Any], team_id: str, subjects: list[QuotaSubject]) -> dict[str, int]:
    """Lock the limited counters (in the given order) and read them: ``kind/subject`` → used.
    The read is its own statement, after the locks, so it sees every write that held them."""
    if not subjects:
        return {}
    keys = [f"{team_id}\x1f{s.kind}\x1f{s.subject}" for s in subjects]
    locks = ", ".join(f"pg_advisory_xact_lock({QUOTA_LOCK_CLASS}, hashtext(%s))" for _ in keys)
    cur.execute(f"SELECT {locks}", keys)
    cur.execute(
        "SELECT kind, subject, used FROM memory_usage WHERE team_id = %s"
        " AND (kind, subject) IN (SELECT * FROM unnest(%s::text[], %s::text[]))",
        (team_id, [s.kind for s in subjects], [s.subject for s in subjects]),
    )
    return {f"{r['kind']}/{r['subject']}": int(r["used"]) for r in cur.fetchall()}


def change_row(
    cur: Cursor[Any],
    before: Memory,
    now: datetime,
    change: MemoryChange,
    *,
    by_person: bool = False,
) -> Memory | None:
    """One ``UPDATE`` of a locked row; ``Conflict`` when the new key is taken. ``by_person``:
    the key or value changed here is marked as a person's edit."""
    sets = ["updated_at = GREATEST(%s, m.updated_at)"]
    params: list[Any] = [now]
    if by_person:
        sets.append("edited_at = %s")
        params.append(now)
    if change.key is not None:
        sets.append("key_canonical = %s")
        params.append(canonical_column(change.key))
    for column, val in (
        ("key", change.key),
        ("value", change.value),
        ("confidence", change.confidence),
        ("status", change.status.value if change.status else None),
    ):
        if val is not None:
            sets.append(f"{column} = %s")
            params.append(val)
    if change.new_text:
        sets.append("embedding = %s::vector, embedding_model = %s, embedding_dims = %s")
        params += [
            vector_literal(change.embedding),
            change.embedding_model,
            None if change.embedding is None else len(change.embedding),
        ]
    params += [uuid.UUID(before.id), before.team_id]
    try:
        cur.execute(
            f"UPDATE memories AS m SET {', '.join(sets)} WHERE m.id = %s"
            f" AND m.team_id = %s RETURNING {COLUMNS}",
            params,
        )
    except pg_errors.UniqueViolation as exc:
        raise Conflict("a memory with this key already exists in this scope") from exc
    row = cur.fetchone()
    return memory_from_row(row) if row else None


def insert_audit(cur: Cursor[Any], action: ReviewAction) -> None:
    cur.execute(
        "INSERT INTO review_actions (id, team_id, memory_id, actor_id, action, before, after,"
        " at, about_user_id) VALUES (%s, %s, %s, %s, %s, %s, %s, %s, %s)",
        (
            uuid.UUID(action.id),
            action.team_id,
            uuid.UUID(action.memory_id),
            action.actor_id,
            action.action,
            Jsonb(action.before) if action.before is not None else None,
            Jsonb(action.after) if action.after is not None else None,
            action.at,
            action.about_user_id,
        ),
    )


def insert_suppression(cur: Cursor[Any], memory: Memory, at: datetime) -> None:
    cur.execute(
        "INSERT INTO memory_suppressions (team_id, scope, owner_id, user_key, digest,"
        " source_user_id, created_at) VALUES (%s, %s, %s, %s, %s, %s, %s) ON CONFLICT DO NOTHING",
        (
            memory.team_id,
            memory.scope.value,
            memory.owner_id,
            memory.user_id or "",
            suppression_digest(memory.key, memory.value),
            memory.source_user_id if memory.scope is Scope.PERSONA else None,
            at,
        ),
    )


def _erase_versions(cur: Cursor[Any], team_id: str, user_id: str, ids: list[Any]) -> int:
    """The versions of the erased rows ``ids`` and of every memory about ``user_id`` (also
    deleted ones); the user's id off the versions they wrote of what stays."""
    cur.execute(
        "DELETE FROM memory_versions WHERE team_id = %(team)s AND (memory_id = ANY(%(ids)s::uuid[])"
        " OR (scope = 'user' AND owner_id = %(user)s)"
        " OR (scope = 'persona_user' AND user_id = %(user)s) OR source_user_id = %(user)s)",
        {"team": team_id, "user": user_id, "ids": ids},
    )
    erased = cur.rowcount
    cur.execute(
        "UPDATE memory_versions SET actor_id = %s WHERE team_id = %s AND actor_id = %s",
        (ERASED_ACTOR, team_id, user_id),
    )
    return erased


def erase_user(cur: Cursor[Any], team_id: str, user_id: str) -> dict[str, int]:
    """Everything of ``user_id`` in the memory tables, in the caller's transaction: their
    ``user`` and ``persona_user`` rows (under their own row-level security), then — as an
    admin of the team — the ``persona`` rows learnt from them, the audit rows about any of
    those (recognised by ``about_user_id``, the ids just deleted, or, for rows written before
    migration 0007, the before/after copies), the suppressions, the versions of those rows and
    of any about them, and their (empty) usage counter. Audit rows and versions where they
    acted on memories that stay lose the actor id."""
    counts = {s.value: 0 for s in Scope}
    # the changes learnt from the user first: those of their own memories go with the rows
    learnt = erase_changes(cur, team_id, user_id)
    cur.execute(
        "DELETE FROM memories WHERE team_id = %s AND ((scope = 'user' AND owner_id = %s)"
        " OR (scope = 'persona_user' AND user_id = %s)) RETURNING scope, id",
        (team_id, user_id, user_id),
    )
    deleted = cur.fetchall()
    cur.execute("SELECT set_config('engram.is_admin', 'on', true)")
    cur.execute(
        "DELETE FROM memories WHERE team_id = %s AND scope = 'persona' AND source_user_id = %s"
        " RETURNING scope, id",
        (team_id, user_id),
    )
    deleted += cur.fetchall()
    for row in deleted:
        counts[row["scope"]] += 1
    cur.execute(
        "DELETE FROM review_actions r WHERE r.team_id = %(team)s"
        " AND (r.about_user_id = %(user)s OR r.memory_id = ANY(%(ids)s::uuid[])"
        " OR (r.about_user_id IS NULL AND r.memory_id IN (SELECT a.memory_id"
        " FROM review_actions a CROSS JOIN LATERAL (VALUES (a.before), (a.after)) AS c(copy)"
        " WHERE a.team_id = %(team)s AND a.about_user_id IS NULL"
        " AND ((c.copy->>'scope' = 'user' AND c.copy->>'ownerId' = %(user)s)"
        " OR (c.copy->>'scope' = 'persona_user' AND c.copy->>'userId' = %(user)s)))))",
        {"team": team_id, "user": user_id, "ids": [row["id"] for row in deleted]},
    )
    audit = cur.rowcount
    cur.execute(
        "UPDATE review_actions SET actor_id = %s WHERE team_id = %s AND actor_id = %s",
        (ERASED_ACTOR, team_id, user_id),
    )
    cur.execute(
        "DELETE FROM memory_suppressions WHERE team_id = %(team)s"
        " AND ((scope = 'user' AND owner_id = %(user)s)"
        " OR (scope = 'persona_user' AND user_key = %(user)s) OR source_user_id = %(user)s)",
        {"team": team_id, "user": user_id},
    )
    suppressions = cur.rowcount
    versions = _erase_versions(cur, team_id, user_id, [row["id"] for row in deleted])
    learnt += erase_changes(cur, team_id, user_id)  # of memories only an admin sees
    cur.execute(
        "DELETE FROM memory_usage WHERE team_id = %s AND kind = 'user' AND subject = %s"
        " AND used = 0",
        (team_id, user_id),
    )
    return {
        **counts,
        "review_actions": audit,
        "suppressions": suppressions,
        "versions": versions,
        "changes": learnt,
    }
