# ruff: noqa: S608 - SQL is composed only from constants in this module; values are bound.
"""The first step of migration 0018, in Python because the key rule is the service's
(``engram.memories.keys.canonical_key``: Unicode case folding, which SQL in PostgreSQL 16
cannot state the same way in every locale).

In the migration's transaction, as the migrating role:

1. ``key_canonical`` is set on every row whose key is not canonical already (the others keep
   NULL: ``lifecycle.IDENTITY``);
2. every row's current state is recorded as its first version (``recordedFrom``: what was
   written before was never recorded), by ``maintenance``;
3. the rows of one owner and scope whose keys now name one memory are merged: the newest
   live row stays (a rejected one only when all are), the others become its earlier
   versions in the order they were last written, their audit rows move to it, a ``merge``
   audit row records each, and the merged rows are deleted;
4. every rejected row's value is suppressed under its canonical key as well.
"""

from __future__ import annotations

import json
import uuid
from collections import defaultdict
from typing import Any

import psycopg
from psycopg.rows import dict_row
from psycopg.types.json import Jsonb

from engram.adapters.postgres.lifecycle import IDENTITY, canonical_column
from engram.events.models import SERVICE_ACTOR
from engram.memories.lifecycle import subject_user, suppression_digest
from engram.memories.models import Memory

_COLUMNS = (
    "id, team_id, scope, owner_id, user_id, key, value, source_channel_id, source_user_id,"
    " confidence, status, created_at, updated_at, version"
)
_SEED = (
    "INSERT INTO memory_versions (team_id, memory_id, version, scope, owner_id, user_id,"
    " source_user_id, key, value, status, actor_id, actor_kind, surface, created_at,"
    " valid_from) SELECT team_id, id, version, scope, owner_id, user_id, source_user_id, key,"
    " value, status, %s, 'maintenance', 'maintenance', created_at, updated_at FROM memories"
)
_VERSION = (
    "INSERT INTO memory_versions (team_id, memory_id, version, scope, owner_id, user_id,"
    " source_user_id, key, value, status, actor_id, actor_kind, surface, created_at,"
    " valid_from, valid_to) VALUES (%(team)s, %(memory)s, %(version)s, %(scope)s, %(owner)s,"
    " %(user)s, %(source)s, %(key)s, %(value)s, %(status)s, %(actor)s, 'maintenance',"
    " 'maintenance', %(created)s, %(from)s, %(to)s)"
)


_DUP = IDENTITY.replace("m.", "d.")


def _memory(row: dict[str, Any]) -> Memory:
    return Memory.model_validate({**row, "id": str(row["id"])})


def _survivor_order(m: Memory) -> tuple[bool, Any, str]:
    """Oldest first, the one that stays last: live rows after rejected ones, then by the
    time they were last written."""
    return (m.status.value != "rejected", m.updated_at, m.id)


def merge_keys(conn: psycopg.Connection[Any]) -> None:
    """Steps 1-4 above, on ``conn`` (in the caller's transaction)."""
    with conn.cursor(row_factory=dict_row) as cur:
        cur.execute("SELECT DISTINCT key FROM memories")
        spelt = {r["key"]: canonical_column(r["key"]) for r in cur.fetchall()}
        other = {key: canon for key, canon in spelt.items() if canon is not None}
        cur.execute(
            "UPDATE memories m SET key_canonical = c.canon"
            " FROM unnest(%s::text[], %s::text[]) AS c(key, canon) WHERE m.key = c.key",
            (list(other), list(other.values())),
        )
        cur.execute(_SEED, (SERVICE_ACTOR,))
        for table in ("review_actions", "memory_suppressions"):
            cur.execute(f"ALTER TABLE {table} NO FORCE ROW LEVEL SECURITY")
        # the rows of identities held more than once
        cur.execute(
            f"SELECT {_COLUMNS}, {IDENTITY} AS identity FROM memories m WHERE"
            f" (m.team_id, m.scope, m.owner_id, COALESCE(m.user_id, ''), {IDENTITY}) IN"
            f" (SELECT d.team_id, d.scope, d.owner_id, COALESCE(d.user_id, ''), {_DUP}"
            " FROM memories d GROUP BY 1, 2, 3, 4, 5 HAVING count(*) > 1)"
        )
        groups: dict[tuple[str, ...], list[Memory]] = defaultdict(list)
        for row in cur.fetchall():
            canon = row.pop("identity")
            m = _memory(row)
            groups[(m.team_id, m.scope.value, m.owner_id, m.user_id or "", canon)].append(m)
        for rows in groups.values():
            _merge(cur, sorted(rows, key=_survivor_order))
        cur.execute(
            f"SELECT {_COLUMNS} FROM memories WHERE status = 'rejected'",
        )
        for m in (_memory(r) for r in cur.fetchall()):
            cur.execute(
                "INSERT INTO memory_suppressions (team_id, scope, owner_id, user_key, digest,"
                " source_user_id, created_at) VALUES (%s, %s, %s, %s, %s, %s, %s)"
                " ON CONFLICT DO NOTHING",
                (
                    m.team_id,
                    m.scope.value,
                    m.owner_id,
                    m.user_id or "",
                    suppression_digest(m.key, m.value),
                    m.source_user_id if m.scope.value == "persona" else None,
                    m.updated_at,
                ),
            )
        for table in ("review_actions", "memory_suppressions"):
            cur.execute(f"ALTER TABLE {table} FORCE ROW LEVEL SECURITY")


def _merge(cur: psycopg.Cursor[Any], rows: list[Memory]) -> None:
    """``rows`` (one memory's, oldest first): the last stays, the others its versions."""
    *merged, survivor = rows
    top = max(survivor.version, len(merged) + 1)
    first = top - len(merged)
    ids = [uuid.UUID(m.id) for m in merged]
    cur.execute("DELETE FROM memory_versions WHERE memory_id = ANY(%s)", (ids,))
    cur.execute(  # the survivor's own version is the last of them
        "UPDATE memory_versions SET version = %s WHERE memory_id = %s",
        (top, uuid.UUID(survivor.id)),
    )
    ends = [m.updated_at for m in merged[1:]] + [survivor.updated_at]
    for n, (m, ended) in enumerate(zip(merged, ends, strict=True)):
        cur.execute(
            _VERSION,
            {
                "team": survivor.team_id,
                "memory": uuid.UUID(survivor.id),
                "version": first + n,
                "scope": survivor.scope.value,
                "owner": survivor.owner_id,
                "user": survivor.user_id,
                "source": m.source_user_id,
                "key": m.key,
                "value": m.value,
                "status": m.status.value,
                "actor": SERVICE_ACTOR,
                "created": survivor.created_at,
                "from": min(m.updated_at, ended),
                "to": ended,
            },
        )
    cur.execute("UPDATE memories SET version = %s WHERE id = %s", (top, uuid.UUID(survivor.id)))
    cur.execute(
        "UPDATE review_actions SET memory_id = %s WHERE memory_id = ANY(%s)",
        (uuid.UUID(survivor.id), ids),
    )
    after = json.loads(survivor.model_copy(update={"version": top}).model_dump_json(by_alias=True))
    for m in merged:
        cur.execute(
            "INSERT INTO review_actions (id, team_id, memory_id, actor_id, action, before,"
            " after, at, about_user_id) VALUES (%s, %s, %s, %s, 'merge', %s, %s, now(), %s)",
            (
                uuid.uuid4(),
                survivor.team_id,
                uuid.UUID(survivor.id),
                SERVICE_ACTOR,
                Jsonb(json.loads(m.model_dump_json(by_alias=True))),
                Jsonb(after),
                subject_user(survivor),
            ),
        )
    cur.execute("DELETE FROM memories WHERE id = ANY(%s)", (ids,))


__all__ = ["merge_keys"]
