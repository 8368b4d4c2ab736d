"""Team insights on PostgreSQL (``engram.insights.ports.InsightsStore``; migration 0012).

The maintenance job writes through the ``SECURITY DEFINER`` functions of 0012 from a
transaction that acts in no team (they refuse a tenant session); a team admin's read runs in
their team under row-level security (``team_insights`` is readable by the team's admins
only), and the threshold is applied again at read time, so raising
``ENGRAM_INSIGHTS_MIN_USERS`` hides smaller rows at once. A contribution is written under
the user's erasure lock and not at all when the user was erased since its facts were read
(migration 0019), so an erasure during a run leaves nothing of the user behind.
"""

from __future__ import annotations

from collections.abc import Sequence
from datetime import UTC, datetime, timedelta

from psycopg import Cursor

from engram.adapters.postgres.pool import Database
from engram.insights.models import Contribution, DomainInsight, InsightsPage, ToolInsight
from engram.memories.ports import AccessContext

_NO_TEAM = AccessContext(team_id="", user_id="engram-maintenance", elevated=False)
_EPOCH = datetime(1970, 1, 1, tzinfo=UTC)


def delete_contribution(cur: Cursor[object], team_id: str, user_id: str) -> int:
    """In the caller's transaction (erasure): the user's contribution, whatever the job
    publishes next."""
    cur.execute(
        "DELETE FROM insight_contributions WHERE team_id = %s AND user_id = %s",
        (team_id, user_id),
    )
    return cur.rowcount


class PostgresInsights:
    def __init__(self, db: Database) -> None:
        self._db = db

    def contribute(
        self,
        team_id: str,
        user_id: str,
        rows: Sequence[Contribution],
        *,
        cycle: int,
        read_at_ms: int,
    ) -> bool:
        with self._db.tenant(_NO_TEAM) as conn:
            row = conn.execute(
                "SELECT engram_insights_contribute(%s, %s, %s, %s, %s::float8[], %s, %s)",
                (
                    team_id,
                    user_id,
                    [r.kind for r in rows],
                    [r.subject for r in rows],
                    [float(r.confidence) for r in rows],
                    cycle,
                    _EPOCH + timedelta(milliseconds=read_at_ms),
                ),
            ).fetchone()
        return bool(row and row[0])

    def publish(self, *, cycle: int, min_users: int, now_ms: int) -> int:
        with self._db.tenant(_NO_TEAM) as conn:
            row = conn.execute(
                "SELECT engram_insights_publish(%s, %s, %s)",
                (cycle, min_users, _EPOCH + timedelta(milliseconds=now_ms)),
            ).fetchone()
        return int(row[0]) if row else 0

    def read(self, team_id: str, *, min_users: int) -> InsightsPage:
        admin = AccessContext(team_id=team_id, user_id="engram-insights", elevated=True)
        with self._db.tenant(admin) as conn:
            run = conn.execute(
                "SELECT aggregated_at FROM team_insights_runs WHERE team_id = %s", (team_id,)
            ).fetchone()
            rows = conn.execute(
                "SELECT kind, subject, users, users_with_affinity, users_with_avoidance,"
                " mean_affinity_confidence, mean_avoidance_confidence, mean_confidence"
                " FROM team_insights WHERE team_id = %s AND users >= %s"
                " ORDER BY users DESC, subject",
                (team_id, min_users),
            ).fetchall()
        tools, domains = [], []
        for kind, subject, users, aff, avo, mean_aff, mean_avo, mean in rows:
            if kind == "tool":
                tools.append(
                    ToolInsight(
                        tool=subject,
                        users=users,
                        users_with_affinity=aff,
                        users_with_avoidance=avo,
                        mean_affinity_confidence=mean_aff if aff >= min_users else None,
                        mean_avoidance_confidence=mean_avo if avo >= min_users else None,
                    )
                )
            else:
                domains.append(DomainInsight(domain=subject, users=users, mean_confidence=mean))
        return InsightsPage(
            aggregated_at=run[0].astimezone(UTC) if run else None,
            min_users=min_users,
            tools=tools,
            domains=domains,
        )
