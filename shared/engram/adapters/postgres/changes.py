# ruff: noqa: S608 - SQL is composed only from constants and filter_sql's conditions; values are bound.
"""Change proposals on PostgreSQL (table ``memory_changes``, migration 0020): the change
methods of ``PostgresTx``, on its cursor. Row-level security shows a change exactly where its
memory is visible."""

from __future__ import annotations

from datetime import UTC
from typing import Any

from psycopg import Cursor

from engram.adapters.postgres.rows import COLUMNS, as_uuid, memory_from_row
from engram.memories.changes import ChangeProposal, ChangeStatus
from engram.memories.models import Memory, MemoryFilter

_CHANGE = (
    "c.id AS change_id, c.team_id AS change_team, c.memory_id AS change_memory,"
    " c.value AS change_value, c.confidence AS change_confidence,"
    " c.source_user_id AS change_source, c.source_channel_id AS change_channel,"
    " c.status AS change_status, c.created_at AS change_created,"
    " c.updated_at AS change_updated"
)


def _change(row: dict[str, Any]) -> ChangeProposal:
    return ChangeProposal(
        id=str(row["change_id"]),
        team_id=row["change_team"],
        memory_id=str(row["change_memory"]),
        value=row["change_value"],
        confidence=float(row["change_confidence"]),
        source_user_id=row["change_source"],
        source_channel_id=row["change_channel"],
        status=ChangeStatus(row["change_status"]),
        created_at=row["change_created"].astimezone(UTC),
        updated_at=row["change_updated"].astimezone(UTC),
    )


def get_change(cur: Cursor[Any], team_id: str, change_id: str) -> ChangeProposal | None:
    cid = as_uuid(change_id)
    if cid is None:
        return None
    cur.execute(
        f"SELECT {_CHANGE} FROM memory_changes c WHERE c.id = %s AND c.team_id = %s",
        (cid, team_id),
    )
    row = cur.fetchone()
    return _change(row) if row else None


def change_for(cur: Cursor[Any], team_id: str, memory_id: str) -> ChangeProposal | None:
    mid = as_uuid(memory_id)
    if mid is None:
        return None
    cur.execute(
        f"SELECT {_CHANGE} FROM memory_changes c WHERE c.memory_id = %s AND c.team_id = %s"
        " AND c.status = 'pending' FOR UPDATE",
        (mid, team_id),
    )
    row = cur.fetchone()
    return _change(row) if row else None


def list_changes(
    cur: Cursor[Any], flt: MemoryFilter, where: list[str], params: list[Any]
) -> list[tuple[ChangeProposal, Memory]]:
    """``where``/``params``: ``flt``'s conditions on the memory ``m`` (without its status),
    the cursor on the change ``c`` (``tx.filter_sql``)."""
    cur.execute(
        f"SELECT {_CHANGE}, {COLUMNS} FROM memory_changes c JOIN memories m ON m.id = c.memory_id"
        f" WHERE c.team_id = %s AND c.status = 'pending' AND {' AND '.join(where)}"
        " ORDER BY c.created_at DESC, c.id DESC LIMIT %s",
        [flt.team_id, *params, flt.limit + 1],
    )
    return [(_change(r), memory_from_row(r)) for r in cur.fetchall()]


def put_change(cur: Cursor[Any], change: ChangeProposal) -> None:
    cur.execute(
        "INSERT INTO memory_changes (id, team_id, memory_id, value, confidence,"
        " source_user_id, source_channel_id, status, created_at, updated_at)"
        " VALUES (%s, %s, %s, %s, %s, %s, %s, %s, %s, %s)"
        " ON CONFLICT (id) DO UPDATE SET value = EXCLUDED.value,"
        " confidence = EXCLUDED.confidence, source_user_id = EXCLUDED.source_user_id,"
        " source_channel_id = EXCLUDED.source_channel_id, status = EXCLUDED.status,"
        " updated_at = EXCLUDED.updated_at",
        (
            as_uuid(change.id),
            change.team_id,
            as_uuid(change.memory_id),
            change.value,
            change.confidence,
            change.source_user_id,
            change.source_channel_id,
            change.status.value,
            change.created_at,
            change.updated_at,
        ),
    )


def erase_changes(cur: Cursor[Any], team_id: str, user_id: str) -> int:
    """The changes learnt from an erased user (those of their deleted memories went with
    them)."""
    cur.execute(
        "DELETE FROM memory_changes WHERE team_id = %s AND source_user_id = %s",
        (team_id, user_id),
    )
    return cur.rowcount


__all__ = ["change_for", "erase_changes", "get_change", "list_changes", "put_change"]
