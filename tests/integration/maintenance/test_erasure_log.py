"""The PostgreSQL erasure log: the port's contract, row-level security, cross-team paging."""

from __future__ import annotations

import pytest

from engram.adapters.postgres.erasures import PostgresErasureLog
from engram.adapters.postgres.pool import Database
from engram.clock import FakeClock
from engram.errors import Forbidden
from engram.memories.ports import AccessContext


def test_record_and_erased_since(db: Database) -> None:
    log = PostgresErasureLog(db)
    assert not log.erased_since("t1", "u1", 0)
    log.record("t1", "u1", 1_700_000_000_123)
    log.record("t1", "u1", 1_700_000_000_123)  # idempotent
    assert log.erased_since("t1", "u1", 1_700_000_000_123)
    assert log.erased_since("t1", "u1", 1_000)
    assert not log.erased_since("t1", "u1", 1_700_000_000_124)
    assert not log.erased_since("t2", "u1", 0)  # another team's user of the same id
    assert not log.erased_since("t1", "u2", 0)
    pending = log.pending_purges(after=None, limit=10)
    assert [(r.team_id, r.user_id, r.erased_at_ms) for r in pending] == [
        ("t1", "u1", 1_700_000_000_123)
    ]


def test_pending_purges_pages_across_teams_in_key_order(db: Database) -> None:
    clock = FakeClock(5_000)
    log = PostgresErasureLog(db, clock=clock)
    records = [("tB", "u1", 300), ("tA", "u2", 100), ("tA", "u1", 100), ("tC", "é", 200)]
    for team, user, at in records:
        log.record(team, user, at)
    seen = []
    after = None
    while True:
        page = log.pending_purges(after=after, limit=2)
        seen.extend(r.key for r in page)
        if len(page) < 2:
            break
        after = page[-1].key
    assert seen == sorted((at, team, user) for team, user, at in records)

    log.mark_purged("tA", "u2", 100)
    log.mark_purged("tA", "u2", 100)  # idempotent
    log.mark_purged("tA", "u2", 999)  # no such erasure: nothing happens
    keys = [r.key for r in log.pending_purges(after=None, limit=10)]
    assert keys == [(100, "tA", "u1"), (200, "tC", "é"), (300, "tB", "u1")]
    # purged erasures are still erasures: a transcript queued before them creates nothing
    assert log.erased_since("tA", "u2", 50)


def test_rows_are_isolated_per_team_under_rls(db: Database) -> None:
    log = PostgresErasureLog(db)
    log.record("t1", "u1", 10)
    log.record("t2", "u9", 20)
    with db.tenant(AccessContext(team_id="t1", user_id="admin", elevated=True)) as conn:
        rows = conn.execute("SELECT team_id, user_id FROM erasures ORDER BY 1").fetchall()
    assert rows == [("t1", "u1")]
    with db.tenant(AccessContext(team_id="", user_id="x")) as conn:
        assert conn.execute("SELECT count(*) FROM erasures").fetchone() == (0,)
        # the application role cannot mark purges directly, only through the function
        assert conn.execute("SELECT has_table_privilege('erasures', 'UPDATE')").fetchone() == (
            False,
        )


def test_a_user_cannot_record_someone_elses_erasure(db: Database) -> None:
    with (
        pytest.raises(Forbidden),
        db.tenant(AccessContext(team_id="t1", user_id="mallory")) as conn,
    ):
        conn.execute(
            "INSERT INTO erasures (team_id, user_id, erased_at) VALUES ('t1', 'victim', now())"
        )
    with (
        pytest.raises(Forbidden),
        db.tenant(AccessContext(team_id="t1", user_id="mallory", elevated=True)) as conn,
    ):
        conn.execute("INSERT INTO erasures (team_id, user_id, erased_at) VALUES ('t2', 'x', now())")
    assert not PostgresErasureLog(db).erased_since("t1", "victim", 0)


def test_a_member_reads_only_their_own_erasures(db: Database) -> None:
    log = PostgresErasureLog(db)
    log.record("t1", "u1", 10)
    log.record("t1", "u2", 20)
    select = "SELECT user_id FROM erasures ORDER BY 1"
    with db.tenant(AccessContext(team_id="t1", user_id="someone")) as conn:
        assert conn.execute(select).fetchall() == []
    with db.tenant(AccessContext(team_id="t1", user_id="u1")) as conn:
        assert conn.execute(select).fetchall() == [("u1",)]
    with db.tenant(AccessContext(team_id="t1", user_id="boss", elevated=True)) as conn:
        assert conn.execute(select).fetchall() == [("u1",), ("u2",)]


@pytest.mark.parametrize("elevated", [False, True])
def test_definer_functions_refuse_a_tenant_session(db: Database, elevated: bool) -> None:
    log = PostgresErasureLog(db)
    log.record("tB", "victim", 10)
    attacker = AccessContext(team_id="tA", user_id="mallory", elevated=elevated)
    calls = [
        "SELECT * FROM engram_pending_erasures(NULL, NULL, NULL, 100)",
        "SELECT engram_mark_erasure_purged('tB', 'victim', to_timestamp(0.01), now())",
        "SELECT * FROM engram_retention_policies(NULL, 100)",
    ]
    for sql in calls:
        with pytest.raises(Forbidden), db.tenant(attacker) as conn:
            conn.execute(sql)
    # nothing was marked: the maintenance path (no tenant) still lists and marks the purge
    assert [r.key for r in log.pending_purges(after=None, limit=10)] == [(10, "tB", "victim")]
    log.mark_purged("tB", "victim", 10)
    assert log.pending_purges(after=None, limit=10) == []
