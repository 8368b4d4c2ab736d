# ruff: noqa: S608 - SQL is composed only from constants in this module; values are bound.
"""Memory versions on PostgreSQL (migration 0017): the statements ``PostgresTx`` runs for
``engram.memories.versions``. Row-level security on ``memory_versions`` follows that of
``memories``, by the owner fields each version carries."""

from __future__ import annotations

import uuid
from datetime import UTC, datetime
from typing import Any

from psycopg import Cursor

from engram.adapters.postgres.recall import recalled_scopes
from engram.adapters.postgres.rows import as_uuid
from engram.memories.models import RecallRequest
from engram.memories.versions import DELETED, MemoryVersion, VersionPage

_FIELDS = (
    "v.team_id, v.memory_id, v.version, v.scope, v.owner_id, v.user_id, v.source_user_id,"
    " v.key, v.value, v.status, v.actor_id, v.actor_kind, v.surface, v.created_at,"
    " v.valid_from, v.valid_to"
)

#: the current version stops being current, and the next one is recorded, in one statement
_RECORD = (
    "WITH closed AS (UPDATE memory_versions SET valid_to = %(from)s WHERE team_id = %(team)s"
    " AND memory_id = %(memory)s AND valid_to IS NULL)"
    " INSERT INTO memory_versions (team_id, memory_id, version, scope, owner_id, user_id,"
    " source_user_id, key, value, status, actor_id, actor_kind, surface, created_at,"
    " valid_from) VALUES (%(team)s, %(memory)s, %(version)s, %(scope)s, %(owner)s, %(user)s,"
    " %(source)s, %(key)s, %(value)s, %(status)s, %(actor)s, %(kind)s, %(surface)s,"
    " %(created)s, %(from)s)"
)

#: the version current at a time: ``valid_from <= at < valid_to``
CURRENT_AT = "v.valid_from <= %(at)s AND (v.valid_to IS NULL OR v.valid_to > %(at)s)"


def version_from_row(row: dict[str, Any]) -> MemoryVersion:
    valid_to = row["valid_to"]
    return MemoryVersion.model_validate(
        {
            **row,
            "memory_id": str(row["memory_id"]),
            "created_at": row["created_at"].astimezone(UTC),
            "valid_from": row["valid_from"].astimezone(UTC),
            "valid_to": None if valid_to is None else valid_to.astimezone(UTC),
        }
    )


def record(cur: Cursor[Any], v: MemoryVersion) -> None:
    cur.execute(
        _RECORD,
        {
            "team": v.team_id,
            "memory": uuid.UUID(v.memory_id),
            "version": v.version,
            "scope": v.scope.value,
            "owner": v.owner_id,
            "user": v.user_id,
            "source": v.source_user_id,
            "key": v.key,
            "value": v.value,
            "status": v.status,
            "actor": v.actor_id,
            "kind": v.actor_kind,
            "surface": v.surface,
            "created": v.created_at,
            "from": v.valid_from,
        },
    )


def _fetch(cur: Cursor[Any], sql: str, params: dict[str, Any]) -> list[dict[str, Any]]:
    """The rows of ``sql``, which names the memory ``%(memory)s`` (none for an id that is
    not a UUID: no memory has it)."""
    mid = as_uuid(params["memory"])
    if mid is None:
        return []
    cur.execute(sql, params | {"memory": mid})
    return cur.fetchall()


def _latest(
    cur: Cursor[Any], team_id: str, memory_id: str, condition: str, **params: Any
) -> MemoryVersion | None:
    """The memory's latest version that meets ``condition`` (on ``v``)."""
    rows = _fetch(
        cur,
        f"SELECT {_FIELDS} FROM memory_versions v WHERE v.team_id = %(team)s"
        f" AND v.memory_id = %(memory)s AND {condition} ORDER BY v.version DESC LIMIT 1",
        {"team": team_id, "memory": memory_id, **params},
    )
    return version_from_row(rows[0]) if rows else None


def one(cur: Cursor[Any], team_id: str, memory_id: str, number: int | None) -> MemoryVersion | None:
    if number is None:
        return _latest(cur, team_id, memory_id, "true")
    return _latest(cur, team_id, memory_id, "v.version = %(n)s", n=number)


def page(cur: Cursor[Any], team_id: str, memory_id: str, after: int, limit: int) -> VersionPage:
    """One page after version ``after`` (one row more, to know whether another follows), and
    the first version recorded, in one statement."""
    rows = _fetch(
        cur,
        "SELECT f.first, p.* FROM (SELECT min(version) AS first FROM memory_versions"
        " WHERE team_id = %(team)s AND memory_id = %(memory)s) f LEFT JOIN LATERAL"
        f" (SELECT {_FIELDS} FROM memory_versions v WHERE v.team_id = %(team)s"
        " AND v.memory_id = %(memory)s AND v.version > %(after)s ORDER BY v.version"
        " LIMIT %(limit)s) p ON true",
        {"team": team_id, "memory": memory_id, "after": after, "limit": limit + 1},
    )
    first = rows[0]["first"] if rows else None
    shown = [r for r in rows if r["version"] is not None][:limit]
    more = sum(1 for r in rows if r["version"] is not None) > limit
    return VersionPage(
        versions=[version_from_row(r) for r in shown],
        recorded_from=None if first is None else int(first),
        next_after=int(shown[-1]["version"]) if more else None,
    )


def at(cur: Cursor[Any], team_id: str, memory_id: str, when: datetime) -> MemoryVersion | None:
    return _latest(cur, team_id, memory_id, CURRENT_AT, at=when)


def current_at(cur: Cursor[Any], request: RecallRequest, when: datetime) -> list[MemoryVersion]:
    """The versions current at ``when`` in the scopes ``request`` recalls from."""
    # the versions as ``m`` too: the recall's condition on its scopes names ``m``
    cur.execute(
        f"SELECT {_FIELDS} FROM memory_versions v, LATERAL (SELECT v.scope, v.owner_id,"
        " v.user_id) AS m WHERE v.team_id = %(team)s"
        f" AND {CURRENT_AT} AND v.status <> %(deleted)s AND {recalled_scopes(request)}",
        {
            "team": request.team_id,
            "at": when,
            "deleted": DELETED,
            "user": request.user_id,
            "persona": request.persona_id,
        },
    )
    return [version_from_row(r) for r in cur.fetchall()]


__all__ = ["CURRENT_AT", "at", "current_at", "one", "page", "record", "version_from_row"]
