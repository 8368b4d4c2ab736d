"""Memory retention policies on PostgreSQL (``engram.maintenance.ports.RetentionPolicySource``).

Migration 0003 adds ``archive_after_days`` / ``delete_archived_after_days`` (NULL: no rule) to
``team_settings`` (a team policy) and ``personas`` (a persona policy). The job lists them
across teams through the ``SECURITY DEFINER`` function ``engram_retention_policies``, from a
transaction that acts in no team (the function refuses a tenant session since migration 0006);
team admins set them with :meth:`PostgresRetentionPolicies.set_policy` under row-level security.
"""

from __future__ import annotations

from collections.abc import Sequence

from engram.adapters.postgres.outbox import append_team_settings_changed
from engram.adapters.postgres.pool import Database
from engram.clock import Clock, SystemClock
from engram.errors import InvalidInput
from engram.maintenance.models import RetentionPolicy
from engram.memories.models import RetentionRules, TeamSettings
from engram.memories.ports import AccessContext

_NO_TEAM = AccessContext(team_id="", user_id="engram-maintenance", elevated=False)


def _days(value: object, field: str) -> int | None:
    if value is None:
        return None
    if isinstance(value, bool) or not isinstance(value, int) or not 1 <= value <= 36_500:
        raise InvalidInput(field, "must be a whole number of days between 1 and 36500, or null")
    return value


class PostgresRetentionPolicies:
    """Reads (job) and writes (team admins) of retention policies."""

    def __init__(self, db: Database, *, clock: Clock | None = None) -> None:
        self._db = db
        self._clock = clock or SystemClock()

    def list_policies(self, *, after: str | None, limit: int) -> Sequence[RetentionPolicy]:
        with self._db.tenant(_NO_TEAM) as conn:
            rows = conn.execute(
                "SELECT team_id, persona_id, archive_after_days, delete_archived_after_days"
                " FROM engram_retention_policies(%s, %s)",
                (after, limit),
            ).fetchall()
        return [
            RetentionPolicy(
                team_id=t, persona_id=p, archive_after_days=a, delete_archived_after_days=d
            )
            for t, p, a, d in rows
        ]

    def set_policy(
        self,
        ctx: AccessContext,
        *,
        persona_id: str | None = None,
        archive_after_days: object = None,
        delete_archived_after_days: object = None,
    ) -> RetentionPolicy:
        """Set (replace) the policy of ``ctx.team_id`` (``persona_id`` None) or of one persona;
        both None clears it. ``ctx`` must be elevated (a team admin or the service): RLS
        refuses the write otherwise (``Forbidden``). Bad days: ``InvalidInput`` naming the
        field, nothing stored. Other settings of the team / persona are left as they are."""
        archive = _days(archive_after_days, "archiveAfterDays")
        delete = _days(delete_archived_after_days, "deleteArchivedAfterDays")
        policy = RetentionPolicy(
            team_id=ctx.team_id,
            persona_id=persona_id,
            archive_after_days=archive,
            delete_archived_after_days=delete,
        )
        when = self._clock.now_ms()
        with self._db.tenant(ctx) as conn, conn.cursor() as cur:
            if persona_id is None:
                cur.execute(
                    "INSERT INTO team_settings (team_id, updated_at, archive_after_days,"
                    " delete_archived_after_days) VALUES (%s, to_timestamp(%s / 1000.0), %s, %s)"
                    " ON CONFLICT (team_id) DO UPDATE"
                    " SET archive_after_days = EXCLUDED.archive_after_days,"
                    " delete_archived_after_days = EXCLUDED.delete_archived_after_days,"
                    " updated_at = EXCLUDED.updated_at RETURNING memory_enabled, updated_at",
                    (ctx.team_id, when, archive, delete),
                )
                row = cur.fetchone()
                assert row is not None
                team = TeamSettings(
                    team_id=ctx.team_id,
                    memory_enabled=row[0],
                    retention=RetentionRules(
                        archive_after_days=archive, delete_archived_after_days=delete
                    ),
                )
                append_team_settings_changed(cur, ctx, team, row[1])
            else:
                cur.execute(
                    "INSERT INTO personas (team_id, persona_id, updated_at, archive_after_days,"
                    " delete_archived_after_days)"
                    " VALUES (%s, %s, to_timestamp(%s / 1000.0), %s, %s)"
                    " ON CONFLICT (team_id, persona_id) DO UPDATE"
                    " SET archive_after_days = EXCLUDED.archive_after_days,"
                    " delete_archived_after_days = EXCLUDED.delete_archived_after_days,"
                    " updated_at = EXCLUDED.updated_at",
                    (ctx.team_id, persona_id, when, archive, delete),
                )
        return policy
