# ruff: noqa: S608 - SQL is composed only from constants in this module; values are bound.
"""Possible duplicates and merges on PostgreSQL (``MemoryTx.nearest`` and ``MemoryTx.fold``),
on the unit of work's cursor."""

from __future__ import annotations

import uuid
from datetime import datetime
from typing import Any

from psycopg import Cursor

from engram.adapters.postgres.recall import INDEXED_VECTOR_DIMS
from engram.adapters.postgres.rows import COLUMNS, memory_from_row, vector_literal
from engram.memories.models import Memory

#: a version number above any a memory reaches: its versions are parked there while the ones
#: folded into it take the numbers below theirs (a primary key is checked row by row)
_PARK = 1 << 40


def nearest(
    cur: Cursor[Any], memory: Memory, model_id: str, embedding: list[float] | None
) -> tuple[Memory, float] | None:
    """Two exact scans in one statement: the owner's active rows of the model (named with the
    predicate of the covering index ``memories_vectors`` when the model's vectors fit it;
    migration 0014), and their pending ones. Another row of the same owner, scope and user
    always has another key (a key has one row), so the row itself is all that is left out."""
    if embedding is not None:
        literal, dims = vector_literal(embedding), len(embedding)
    else:  # the memory's stored vector of the model, in its text form
        cur.execute(
            "SELECT embedding::text AS v, embedding_dims AS dims FROM memories"
            " WHERE id = %s AND embedding_model = %s AND embedding IS NOT NULL",
            (uuid.UUID(memory.id), model_id),
        )
        stored = cur.fetchone()
        if stored is None:
            return None
        literal, dims = stored["v"], int(stored["dims"])
    indexed = (
        f" AND m.embedding_dims <= {INDEXED_VECTOR_DIMS}" if dims <= INDEXED_VECTOR_DIMS else ""
    )
    owner = (
        "m.team_id = %(team)s AND m.owner_id = %(owner)s AND m.scope = %(scope)s"
        " AND COALESCE(m.user_id, '') = %(user)s AND m.id <> %(id)s"
        " AND m.embedding_model = %(model)s AND m.embedding IS NOT NULL"
    )
    distance = "m.embedding <=> %(emb)s::vector"
    cur.execute(
        f"SELECT n.id, n.d FROM (SELECT m.id, {distance} AS d FROM memories m"
        f" WHERE {owner} AND m.status = 'active'{indexed}"
        f" UNION ALL SELECT m.id, {distance} AS d FROM memories m"
        f" WHERE {owner} AND m.status = 'pending_review') n ORDER BY n.d, n.id LIMIT 1",
        {
            "emb": literal,
            "team": memory.team_id,
            "scope": memory.scope.value,
            "owner": memory.owner_id,
            "user": memory.user_id or "",
            "id": uuid.UUID(memory.id),
            "model": model_id,
        },
    )
    found = cur.fetchone()
    if found is None:
        return None
    cur.execute(f"SELECT {COLUMNS} FROM memories m WHERE m.id = %s", (found["id"],))
    row = cur.fetchone()
    return None if row is None else (memory_from_row(row), 1 - float(found["d"]))


def fold(cur: Cursor[Any], row: Memory, into: Memory, now: datetime) -> Memory:
    ids = {"team": row.team_id, "row": uuid.UUID(row.id), "into": uuid.UUID(into.id)}
    cur.execute(
        "UPDATE memory_versions SET version = version + %(park)s"
        " WHERE team_id = %(team)s AND memory_id = %(into)s",
        ids | {"park": _PARK},
    )
    cur.execute(
        "UPDATE memory_versions v SET memory_id = %(into)s, version = n.rn,"
        " valid_to = COALESCE(v.valid_to, %(now)s) FROM (SELECT version,"
        " row_number() OVER (ORDER BY version) AS rn FROM memory_versions"
        " WHERE team_id = %(team)s AND memory_id = %(row)s) n"
        " WHERE v.team_id = %(team)s AND v.memory_id = %(row)s AND v.version = n.version",
        ids | {"now": now},
    )
    moved = cur.rowcount
    cur.execute(
        "UPDATE memory_versions SET version = version - %(park)s + %(moved)s"
        " WHERE team_id = %(team)s AND memory_id = %(into)s AND version > %(park)s",
        ids | {"park": _PARK, "moved": moved},
    )
    cur.execute(
        f"UPDATE memories AS m SET version = m.version + %(moved)s, updated_at = %(now)s"
        f" WHERE m.id = %(into)s AND m.team_id = %(team)s RETURNING {COLUMNS}",
        ids | {"moved": moved, "now": now},
    )
    after = cur.fetchone()
    assert after is not None, "into is locked by this transaction"
    return memory_from_row(after)


__all__ = ["fold", "nearest"]
