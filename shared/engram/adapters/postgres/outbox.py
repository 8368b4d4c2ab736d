"""The transactional outbox on PostgreSQL (migration 0011).

``append`` is called by the store adapters with the cursor of the change itself, so the event
row commits or rolls back with the change. It builds the event model (validating it) and
inserts it with the aggregate's next sequence number (``event_sequences``; the counter row
stays locked until commit, so numbers follow commit order), taken by the same statement.
``PostgresOutbox`` is the relay's side (``engram.events.ports.Outbox``), through the
``SECURITY DEFINER`` functions of 0011 from a transaction that acts in no team.
"""

from __future__ import annotations

import hashlib
import uuid
from collections.abc import Sequence
from datetime import UTC, datetime, timedelta
from typing import Any

from psycopg import Cursor
from psycopg.types.json import Jsonb

from engram.adapters.postgres.pool import Database
from engram.events.models import (
    Cause,
    DomainEvent,
    MemoryEvent,
    MemoryEventType,
    MemoryMerged,
    MemoryUpdated,
    RetentionSettings,
    TeamSettingsChanged,
    UserErased,
    schema_version,
)
from engram.events.ports import OutboxEntry, OutboxStats
from engram.memories.models import Memory, NewMemory, TeamSettings
from engram.memories.ports import AccessContext

_NO_TEAM = AccessContext(team_id="", user_id="engram-events", elevated=False)
_EPOCH = datetime(1970, 1, 1, tzinfo=UTC)


def _ts(ms: int) -> datetime:
    return _EPOCH + timedelta(milliseconds=ms)


#: one event: the aggregate's next number (its counter row stays locked until commit) and the
#: outbox row carrying it, in one statement; the number replaces the detail's placeholder
_APPEND_SQL = (
    "WITH n AS (INSERT INTO event_sequences AS s (team_id, aggregate_id, last_seq)"
    " VALUES (%(team)s, %(aggregate)s, 1) ON CONFLICT (team_id, aggregate_id)"
    " DO UPDATE SET last_seq = s.last_seq + 1 RETURNING last_seq)"
    " INSERT INTO event_outbox (event_id, team_id, aggregate_id, sequence, event_type, detail,"
    " created_at, next_attempt_at) SELECT %(event_id)s, %(team)s, %(aggregate)s, n.last_seq,"
    " %(type)s, %(detail)s::jsonb || jsonb_build_object(%(field)s::text, n.last_seq),"
    " %(at)s, %(at)s"
    " FROM n"
)

#: an event's sequence before the statement that appends it numbers it
_UNNUMBERED = 1
#: a saved memory's id before the statement that saves it says which row it is
_PLACEHOLDER_ID = "00000000-0000-0000-0000-000000000000"


def _field(name: str) -> str:
    """A memory event's field as the detail names it."""
    return MemoryEvent.model_fields[name].alias or name


_SEQUENCE_FIELD = _field("sequence")


def _insert(cur: Cursor[Any], aggregate_id: str, event: DomainEvent, at: datetime) -> None:
    cur.execute(
        _APPEND_SQL,
        {
            "event_id": uuid.UUID(event.event_id),
            "team": event.team_id,
            "aggregate": aggregate_id,
            "type": event.type,
            "detail": Jsonb(event.to_detail()),
            "field": _SEQUENCE_FIELD,
            "at": at,
        },
    )


def _common(event_type: str, team_id: str, at: datetime) -> dict[str, Any]:
    return {
        "event_id": str(uuid.uuid4()),
        "schema_version": schema_version(event_type),
        "occurred_at": at,
        "team_id": team_id,
        "sequence": _UNNUMBERED,
    }


def _memory_event(
    event_type: MemoryEventType,
    memory: Memory | NewMemory,
    memory_id: str,
    *,
    actor_id: str,
    cause: Cause,
    at: datetime,
    deleted: bool = False,
    into: str | None = None,
) -> MemoryEvent | MemoryUpdated | MemoryMerged:
    fields: dict[str, Any] = {
        **_common(event_type, memory.team_id, at),
        "type": event_type,
        "memory_id": memory_id,
        "scope": memory.scope.value,
        "owner_id": memory.owner_id,
        "user_id": memory.user_id,
        "status": None if deleted else memory.status.value,
        "actor_id": actor_id,
        "cause": cause,
    }
    if event_type == "memory.updated":
        assert isinstance(memory, Memory), "an update is of a stored memory"
        return MemoryUpdated(**fields, version=memory.version)
    if event_type == "memory.merged":
        assert into is not None, "a merge names the memory it folded into"
        return MemoryMerged(**fields, into_id=into)
    return MemoryEvent(**fields)


def append_memory_event(
    cur: Cursor[Any],
    event_type: MemoryEventType,
    memory: Memory,
    *,
    actor_id: str,
    cause: Cause,
    at: datetime,
    deleted: bool = False,
    into: str | None = None,
) -> None:
    """The event of one change of ``memory`` (its state after the change; ``deleted``: gone;
    ``into``: the memory a merged one was folded into)."""
    event = _memory_event(
        event_type,
        memory,
        memory.id,
        actor_id=actor_id,
        cause=cause,
        at=at,
        deleted=deleted,
        into=into,
    )
    _insert(cur, f"memory:{memory.id}", event, at)


#: The event of the row a statement's CTE ``saved`` wrote (its ``id``, ``team_id``,
#: ``version`` and ``created``), appended by the same statement: ``memory.saved`` when the
#: row was created, else ``memory.updated`` (its schema version, with the row's version).
#: Its aggregate's next number and outbox row as in ``_APPEND_SQL``; the row's id, the type
#: and the number replace the detail's placeholders.
SAVED_EVENT_CTES = (
    "saved_type AS (SELECT CASE WHEN created THEN %(ev_created)s ELSE %(ev_updated)s END"
    " AS event_type FROM saved),"
    " saved_seq AS (INSERT INTO event_sequences AS s (team_id, aggregate_id, last_seq)"
    " SELECT team_id, 'memory:' || id, 1 FROM saved ON CONFLICT (team_id, aggregate_id)"
    " DO UPDATE SET last_seq = s.last_seq + 1 RETURNING aggregate_id, last_seq),"
    " saved_event AS (INSERT INTO event_outbox (event_id, team_id, aggregate_id, sequence,"
    " event_type, detail, created_at, next_attempt_at) SELECT %(ev_id)s, saved.team_id,"
    " q.aggregate_id, q.last_seq, t.event_type, %(ev_detail)s::jsonb || jsonb_build_object("
    " %(ev_id_field)s::text, saved.id::text, %(ev_type_field)s::text, t.event_type,"
    " %(ev_seq_field)s::text, q.last_seq) || CASE WHEN saved.created THEN '{}'::jsonb"
    " ELSE jsonb_build_object(%(ev_schema_field)s::text, %(ev_updated_schema)s::int,"
    " %(ev_version_field)s::text, saved.version) END, %(ev_at)s, %(ev_at)s"
    " FROM saved, saved_seq q, saved_type t)"
)


def saved_event_params(
    memory: NewMemory, *, actor_id: str, cause: Cause, at: datetime
) -> dict[str, Any]:
    """The parameters of ``SAVED_EVENT_CTES`` for a save of ``memory`` (its state after the
    save: the key's one row, with ``memory``'s status)."""
    event = _memory_event(
        "memory.saved", memory, _PLACEHOLDER_ID, actor_id=actor_id, cause=cause, at=at
    )
    return {
        "ev_created": "memory.saved",
        "ev_updated": "memory.updated",
        "ev_id": uuid.UUID(event.event_id),
        "ev_detail": Jsonb(event.to_detail()),
        "ev_id_field": _field("memory_id"),
        "ev_type_field": _field("type"),
        "ev_seq_field": _SEQUENCE_FIELD,
        "ev_schema_field": _field("schema_version"),
        "ev_updated_schema": schema_version("memory.updated"),
        "ev_version_field": MemoryUpdated.model_fields["version"].alias or "version",
        "ev_at": at,
    }


def user_aggregate(team_id: str, user_id: str) -> str:
    """The aggregate of a user's events: a digest, so the sequence counter that outlives the
    erasure keeps no user id."""
    digest = hashlib.sha256(f"{team_id}\x1f{user_id}".encode()).hexdigest()[:32]
    return f"user:{digest}"


def append_user_erased(cur: Cursor[Any], team_id: str, user_id: str, at: datetime) -> None:
    aggregate = user_aggregate(team_id, user_id)
    event = UserErased(
        **_common("user.erased", team_id, at), type="user.erased", user_id=user_id, erased_at=at
    )
    _insert(cur, aggregate, event, at)


def append_team_settings_changed(
    cur: Cursor[Any], ctx: AccessContext, settings: TeamSettings, at: datetime
) -> None:
    event = TeamSettingsChanged(
        **_common("team.settings.changed", ctx.team_id, at),
        type="team.settings.changed",
        actor_id=ctx.user_id,
        memory_enabled=settings.memory_enabled,
        retention=RetentionSettings(
            archive_after_days=settings.retention.archive_after_days,
            delete_archived_after_days=settings.retention.delete_archived_after_days,
        ),
    )
    _insert(cur, "team", event, at)


class PostgresOutbox:
    """``engram.events.ports.Outbox`` over :class:`Database` (the relay's cross-team side)."""

    def __init__(self, db: Database) -> None:
        self._db = db

    def claim(self, *, limit: int, lease_ms: int, now_ms: int) -> Sequence[OutboxEntry]:
        with self._db.tenant(_NO_TEAM) as conn:
            rows = conn.execute(
                "SELECT event_id, event_type, detail, attempts, position"
                " FROM engram_outbox_claim(%s, %s, %s) ORDER BY position",
                (limit, timedelta(milliseconds=lease_ms), _ts(now_ms)),
            ).fetchall()
        return [
            OutboxEntry(
                event_id=str(r[0]), event_type=r[1], detail=r[2], attempts=r[3], position=r[4]
            )
            for r in rows
        ]

    def mark_sent(self, event_ids: Sequence[str], *, now_ms: int) -> None:
        with self._db.tenant(_NO_TEAM) as conn:
            conn.execute(
                "SELECT engram_outbox_sent(%s::uuid[], %s)",
                ([uuid.UUID(i) for i in event_ids], _ts(now_ms)),
            )

    def mark_failed(
        self, event_id: str, *, error: str, retry_at_ms: int, dead: bool, now_ms: int
    ) -> None:
        with self._db.tenant(_NO_TEAM) as conn:
            conn.execute(
                "SELECT engram_outbox_failed(%s, %s, %s, %s)",
                (uuid.UUID(event_id), error, _ts(retry_at_ms), dead),
            )

    def prune(self, *, sent_before_ms: int, limit: int) -> int:
        with self._db.tenant(_NO_TEAM) as conn:
            row = conn.execute(
                "SELECT engram_outbox_prune(%s, %s)", (_ts(sent_before_ms), limit)
            ).fetchone()
        return int(row[0]) if row else 0

    def stats(self, *, now_ms: int) -> OutboxStats:
        with self._db.tenant(_NO_TEAM) as conn:
            row = conn.execute(
                "SELECT pending, dead, oldest_pending_age_s FROM engram_outbox_stats(%s)",
                (_ts(now_ms),),
            ).fetchone()
        assert row is not None
        return OutboxStats(pending=int(row[0]), dead=int(row[1]), oldest_pending_age_s=row[2])
