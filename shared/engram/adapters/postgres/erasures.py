"""The erasure log on PostgreSQL (``engram.maintenance.ports.ErasureLog``).

Table ``erasures`` (migration 0002): one row per erasure, ``purged_at`` set once the
maintenance job has stopped re-checking it. Row-level security as for memories: a user records
and reads their own erasures, a team admin (or the service acting elevated) the team's
(migration 0006; ``DELETE /v1/me`` records the caller's erasure; the extraction drain asks
about one user). The job's cross-team reads go through two ``SECURITY DEFINER`` functions,
``engram_pending_erasures`` (keyset-paged, ids and times only) and
``engram_mark_erasure_purged``, called from a transaction that acts in no team; since 0006
they refuse (``Forbidden``) when a tenant is set in the session, so a request never reaches
another team's rows through them.
"""

from __future__ import annotations

from collections.abc import Sequence
from datetime import UTC, datetime, timedelta
from typing import Any

from psycopg import Cursor

from engram.adapters.postgres.insights import delete_contribution
from engram.adapters.postgres.outbox import append_user_erased
from engram.adapters.postgres.pool import Database
from engram.clock import Clock, SystemClock
from engram.maintenance.models import ErasureRecord
from engram.memories.ports import AccessContext

#: The context of the job's cross-team calls: no team, so RLS shows no row.
_NO_TEAM = AccessContext(team_id="", user_id="engram-maintenance", elevated=False)


_EPOCH = datetime(1970, 1, 1, tzinfo=UTC)


def _ts(ms: int) -> datetime:
    return _EPOCH + timedelta(milliseconds=ms)


def _ms(value: datetime) -> int:
    return (value - _EPOCH) // timedelta(milliseconds=1)


#: advisory lock class of one user's erasure: an erasure holds it exclusively until its
#: transaction ends, a proposal's check shares it, so a proposal either sees the erasure or
#: commits before the erasure deletes the user's rows (and so with them); migration 0019's
#: insights contribution shares it by the same number (4543059)
ERASURE_LOCK_CLASS = 0x455253


def _lock_user(cur: Cursor[Any], team_id: str, user_id: str, *, shared: bool) -> None:
    kind = "pg_advisory_xact_lock_shared" if shared else "pg_advisory_xact_lock"
    cur.execute(f"SELECT {kind}(%s, hashtext(%s))", (ERASURE_LOCK_CLASS, f"{team_id}\x1f{user_id}"))


def record_erasure(cur: Cursor[Any], team_id: str, user_id: str, at_ms: int) -> None:
    """In the caller's transaction: the erasure's row (once), its ``user.erased`` event, and
    the user's contribution to the team's insights removed. The user's erasure lock is held
    until the transaction ends."""
    at = _ts(at_ms)
    _lock_user(cur, team_id, user_id, shared=False)
    cur.execute(
        "INSERT INTO erasures (team_id, user_id, erased_at) VALUES (%s, %s, %s) "
        "ON CONFLICT DO NOTHING",
        (team_id, user_id, at),
    )
    if cur.rowcount == 1:
        append_user_erased(cur, team_id, user_id, at)
    delete_contribution(cur, team_id, user_id)


def erased_since(
    cur: Cursor[Any], team_id: str, user_id: str, since_ms: int, *, hold: bool = False
) -> bool:
    """``hold``: first share the user's erasure lock until the transaction ends (an erasure in
    flight is waited for, and one that starts later waits for this transaction)."""
    if hold:
        _lock_user(cur, team_id, user_id, shared=True)
    cur.execute(
        "SELECT 1 FROM erasures WHERE team_id = %s AND user_id = %s AND erased_at >= %s LIMIT 1",
        (team_id, user_id, _ts(since_ms)),
    )
    return cur.fetchone() is not None


class PostgresErasureLog:
    """``ErasureLog`` over :class:`Database`. Errors: ``Unavailable`` when PostgreSQL is
    down or slow (from ``Database.tenant``)."""

    def __init__(self, db: Database, *, clock: Clock | None = None) -> None:
        self._db = db
        self._clock = clock or SystemClock()

    def record(self, team_id: str, user_id: str, at_ms: int) -> None:
        """Idempotent: recording the same erasure twice keeps one row (and one
        ``user.erased`` event, written with the row in its transaction). The user's
        contribution to the team's insights goes in the same transaction."""
        ctx = AccessContext(team_id=team_id, user_id=user_id)
        with self._db.tenant(ctx) as conn, conn.cursor() as cur:
            record_erasure(cur, team_id, user_id, at_ms)

    def erased_since(self, team_id: str, user_id: str, since_ms: int) -> bool:
        ctx = AccessContext(team_id=team_id, user_id=user_id)
        with self._db.tenant(ctx) as conn, conn.cursor() as cur:
            return erased_since(cur, team_id, user_id, since_ms)

    def pending_purges(
        self, *, after: tuple[int, str, str] | None, limit: int
    ) -> Sequence[ErasureRecord]:
        at, team, user = (None, None, None) if after is None else (_ts(after[0]), *after[1:])
        with self._db.tenant(_NO_TEAM) as conn:
            rows = conn.execute(
                "SELECT team_id, user_id, erased_at FROM engram_pending_erasures(%s, %s, %s, %s)",
                (at, team, user, limit),
            ).fetchall()
        return [ErasureRecord(team_id=t, user_id=u, erased_at_ms=_ms(e)) for t, u, e in rows]

    def mark_purged(self, team_id: str, user_id: str, at_ms: int) -> None:
        with self._db.tenant(_NO_TEAM) as conn:
            conn.execute(
                "SELECT engram_mark_erasure_purged(%s, %s, %s, %s)",
                (team_id, user_id, _ts(at_ms), _ts(self._clock.now_ms())),
            )
