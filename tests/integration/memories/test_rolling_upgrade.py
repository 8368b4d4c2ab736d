"""Migrations during a deploy: the write statements of the releases before run against the
schema the shipped migrations build, on PostgreSQL 18 and 16.

A deploy migrates first and replaces the functions after, so for minutes the code of the
release before writes to the new schema (docs/deployment.md, "Migrations during a deploy").
``PREVIOUS_RELEASES`` holds each earlier release's write statements as that release ran
them, by the release's last migration; a release that ships a migration adds the statements
of the release it replaces. Migration 0010 restored the unique index the release before 0007
upserts against (0007 had made it partial); the second half of this module checks that
0010 carries a database already at 0009 — with rejected rows sharing a key with live ones —
into one row per key without losing a rejection.
"""

from __future__ import annotations

import uuid
from collections.abc import Iterator
from datetime import UTC, datetime
from typing import Any

import psycopg
import pytest
from tests.integration.memories.test_lifecycle_migration import RECOUNT, USAGE, _migrate

from engram.adapters.postgres import migrate
from engram.adapters.postgres.migrate import apply_migrations
from engram.adapters.postgres.pool import Database
from engram.adapters.postgres.store import PostgresMemoryStore
from engram.clock import FakeClock
from engram.identity import Caller
from engram.memories.commands import SaveMemory
from engram.memories.keys import canonical_key
from engram.memories.ports import AccessContext
from engram.memories.service import MemoryService
from engram.settings import Settings

pytestmark = pytest.mark.integration

DIMS = 64
ADMIN = Caller(user_id="root", team_id="acme", is_team_admin=True)

_UPSERT_BEFORE_0007 = (
    "INSERT INTO memories AS m (id, team_id, scope, owner_id, user_id, key, value,"
    " source_channel_id, confidence, status, embedding, created_at, updated_at)"
    " SELECT %(id)s, %(team)s, %(scope)s, %(owner)s, %(user)s, %(key)s, %(value)s, %(channel)s,"
    " %(confidence)s, %(status)s, NULL::vector, %(now)s::timestamptz, %(now)s::timestamptz"
    " ON CONFLICT (team_id, scope, owner_id, COALESCE(user_id, ''), key) DO UPDATE"
    " SET value = EXCLUDED.value, confidence = EXCLUDED.confidence,"
    " status = EXCLUDED.status, source_channel_id = EXCLUDED.source_channel_id,"
    " embedding = EXCLUDED.embedding,"
    " updated_at = GREATEST(EXCLUDED.updated_at, m.updated_at)"
    " RETURNING id, (xmax = 0) AS created"
)
_UPSERT_0009 = (
    "INSERT INTO memories AS m (id, team_id, scope, owner_id, user_id, key, value,"
    " source_channel_id, source_user_id, confidence, status, embedding, created_at,"
    " updated_at) VALUES (%(id)s, %(team)s, %(scope)s, %(owner)s, %(user)s, %(key)s,"
    " %(value)s, %(channel)s, %(source)s, %(confidence)s, %(status)s,"
    " NULL::vector, %(now)s, %(now)s)"
    " ON CONFLICT (team_id, scope, owner_id, COALESCE(user_id, ''), key)"
    " WHERE status <> 'rejected' DO UPDATE"
    " SET value = EXCLUDED.value, confidence = EXCLUDED.confidence,"
    " status = EXCLUDED.status, source_channel_id = EXCLUDED.source_channel_id,"
    " source_user_id = EXCLUDED.source_user_id, embedding = EXCLUDED.embedding,"
    " updated_at = GREATEST(EXCLUDED.updated_at, m.updated_at)"
    " RETURNING id, (xmax = 0) AS created"
)
_PROPOSE_0009 = (
    "INSERT INTO memories AS m (id, team_id, scope, owner_id, user_id, key, value,"
    " source_channel_id, source_user_id, confidence, status, embedding, created_at, updated_at)"
    " SELECT %(id)s, %(team)s, %(scope)s, %(owner)s, %(user)s, %(key)s, %(value)s, %(channel)s,"
    " %(source)s, %(confidence)s, 'pending_review', NULL::vector,"
    " %(now)s::timestamptz, %(now)s::timestamptz"
    " WHERE NOT EXISTS (SELECT 1 FROM memories r WHERE r.team_id = %(team)s"
    " AND r.scope = %(scope)s AND r.owner_id = %(owner)s"
    " AND COALESCE(r.user_id, '') = COALESCE(%(user)s, '') AND r.key = %(key)s"
    " AND r.status = 'rejected' AND r.value = %(value)s)"
    " ON CONFLICT (team_id, scope, owner_id, COALESCE(user_id, ''), key)"
    " WHERE status <> 'rejected' DO UPDATE"
    " SET value = EXCLUDED.value, confidence = EXCLUDED.confidence, status = EXCLUDED.status,"
    " source_channel_id = EXCLUDED.source_channel_id, source_user_id = EXCLUDED.source_user_id,"
    " embedding = EXCLUDED.embedding, updated_at = GREATEST(EXCLUDED.updated_at, m.updated_at)"
    " WHERE m.status IN ('pending_review', 'archived')"
    " RETURNING id, (xmax = 0) AS created"
)
_PROPOSE_0015 = (
    "INSERT INTO memories AS m (id, team_id, scope, owner_id, user_id, key, value,"
    " source_channel_id, source_user_id, confidence, status, embedding, embedding_model,"
    " embedding_dims, created_at, updated_at)"
    " SELECT %(id)s, %(team)s, %(scope)s, %(owner)s, %(user)s, %(key)s, %(value)s, %(channel)s,"
    " %(source)s, %(confidence)s, 'pending_review', %(embedding)s::vector,"
    " %(embedding_model)s, %(embedding_dims)s::integer,"
    " %(now)s::timestamptz, %(now)s::timestamptz"
    " WHERE (%(since)s::timestamptz IS NULL OR NOT EXISTS (SELECT 1 FROM erasures e"
    " WHERE e.team_id = %(team)s AND e.user_id = %(source)s AND e.erased_at >= %(since)s))"
    " AND NOT EXISTS (SELECT 1 FROM memories r WHERE r.team_id = %(team)s"
    " AND r.scope = %(scope)s AND r.owner_id = %(owner)s"
    " AND COALESCE(r.user_id, '') = COALESCE(%(user)s, '') AND r.key = %(key)s"
    " AND r.status = 'rejected' AND r.value = %(value)s)"
    " AND NOT EXISTS (SELECT 1 FROM memory_suppressions s WHERE s.team_id = %(team)s"
    " AND s.scope = %(scope)s AND s.owner_id = %(owner)s"
    " AND s.user_key = COALESCE(%(user)s, '') AND s.digest = %(digest)s)"
    " ON CONFLICT (team_id, scope, owner_id, COALESCE(user_id, ''), key) DO UPDATE"
    " SET value = EXCLUDED.value, confidence = EXCLUDED.confidence, status = EXCLUDED.status,"
    " source_channel_id = EXCLUDED.source_channel_id, source_user_id = EXCLUDED.source_user_id,"
    " embedding = EXCLUDED.embedding, embedding_model = EXCLUDED.embedding_model,"
    " embedding_dims = EXCLUDED.embedding_dims,"
    " updated_at = GREATEST(EXCLUDED.updated_at, m.updated_at)"
    " WHERE m.status IN ('pending_review', 'archived')"
    " RETURNING id, (xmax = 0) AS created"
)
_DROP_REJECTED_0015 = (
    "DELETE FROM memories m WHERE m.team_id = %(team)s AND m.scope = %(scope)s"
    " AND m.owner_id = %(owner)s AND COALESCE(m.user_id, '') = COALESCE(%(user)s, '')"
    " AND m.key = %(key)s AND m.status = 'rejected' AND m.value IS DISTINCT FROM %(value)s"
    " RETURNING id"
)
#: the release of 0016 saved (its event in the same statement, left out here: it writes no
#: memories), created a key's row when proposing, and renamed a key, all by exact key
_SAVE_0016 = (
    "INSERT INTO memories AS m (id, team_id, scope, owner_id, user_id, key, value,"
    " source_channel_id, source_user_id, confidence, status, embedding,"
    " embedding_model, embedding_dims, created_at, updated_at) VALUES (%(id)s,"
    " %(team)s, %(scope)s, %(owner)s, %(user)s, %(key)s, %(value)s, %(channel)s,"
    " %(source)s, %(confidence)s, %(status)s, %(embedding)s::vector,"
    " %(embedding_model)s, %(embedding_dims)s, %(now)s, %(now)s)"
    " ON CONFLICT (team_id, scope, owner_id, COALESCE(user_id, ''), key) DO UPDATE"
    " SET value = EXCLUDED.value, confidence = EXCLUDED.confidence,"
    " status = EXCLUDED.status, source_channel_id = EXCLUDED.source_channel_id,"
    " source_user_id = EXCLUDED.source_user_id, embedding = EXCLUDED.embedding,"
    " embedding_model = EXCLUDED.embedding_model,"
    " embedding_dims = EXCLUDED.embedding_dims,"
    " updated_at = GREATEST(EXCLUDED.updated_at, m.updated_at) WHERE m.status <> 'rejected'"
    " RETURNING id, (xmax = 0) AS created"
)
_INSERT_0016 = (
    "INSERT INTO memories AS m (id, team_id, scope, owner_id, user_id, key, value,"
    " source_channel_id, source_user_id, confidence, status, embedding, embedding_model,"
    " embedding_dims, created_at, updated_at) VALUES (%(id)s, %(team)s, %(scope)s, %(owner)s,"
    " %(user)s, %(key)s, %(value)s, %(channel)s, %(source)s, %(confidence)s, 'pending_review',"
    " %(embedding)s::vector, %(embedding_model)s, %(embedding_dims)s, %(now)s, %(now)s)"
    " ON CONFLICT (team_id, scope, owner_id, COALESCE(user_id, ''), key) DO NOTHING"
    " RETURNING id"
)
_RENAME_0016 = (
    "UPDATE memories AS m SET key = upper(%(key)s) || ' Renamed', edited_at = %(now)s"
    " WHERE m.id = %(id)s AND m.team_id = %(team)s RETURNING id"
)
_RENAME_BACK_0016 = (
    "UPDATE memories AS m SET key = %(key)s, edited_at = %(now)s"
    " WHERE m.id = %(id)s AND m.team_id = %(team)s RETURNING id"
)

_REVIEW_BEFORE_0007 = (
    "UPDATE memories SET status = %(status)s, updated_at = %(now)s"
    " WHERE id = %(id)s AND team_id = %(team)s RETURNING id"
)
_AUDIT_BEFORE_0007 = (
    "INSERT INTO review_actions (id, team_id, memory_id, actor_id, action, before, after, at)"
    " VALUES (%(audit)s, %(team)s, %(id)s, 'root', 'reject', NULL, NULL, %(now)s)"
)
_DELETE_BEFORE_0007 = "DELETE FROM memories WHERE id = %(id)s AND team_id = %(team)s RETURNING id"

#: release (by its last migration) -> the statements its code writes memories with, in an
#: order one key goes through: saved, saved again, reviewed (and audited), deleted. The
#: releases of 0008 and 0009 ran the same statements (0009's version column is kept by a
#: trigger).
PREVIOUS_RELEASES: dict[str, list[str]] = {
    "0006": [
        _UPSERT_BEFORE_0007,
        _UPSERT_BEFORE_0007,
        _REVIEW_BEFORE_0007,
        _AUDIT_BEFORE_0007,
        _DELETE_BEFORE_0007,
    ],
    "0009": [_UPSERT_0009, _PROPOSE_0009, _UPSERT_0009, _DELETE_BEFORE_0007],
    # 0016 added edited_at: the release before proposes (creates, then refreshes) without it
    "0015": [
        _DROP_REJECTED_0015,
        _PROPOSE_0015,
        _DROP_REJECTED_0015,
        _PROPOSE_0015,
        _DELETE_BEFORE_0007,
    ],
    # 0017/0018 made a key's identity its canonical form: the release before writes exact keys
    "0016": [
        _DROP_REJECTED_0015,
        _INSERT_0016,
        _SAVE_0016,
        _RENAME_0016,
        _RENAME_BACK_0016,
        _SAVE_0016,
        _DELETE_BEFORE_0007,
    ],
}


def _now() -> datetime:
    return datetime(2026, 1, 1, tzinfo=UTC)


@pytest.fixture
def migrated(each_database_url: str) -> Iterator[tuple[str, Database]]:
    apply_migrations(each_database_url, embedding_dimensions=DIMS)
    db = Database(each_database_url, max_size=2, connect_timeout_s=3, statement_timeout_ms=5000)
    try:
        yield each_database_url, db
    finally:
        db.close()


def _service(db: Database) -> MemoryService:
    store = PostgresMemoryStore(db, FakeClock())
    return MemoryService(store, settings=Settings(), clock=FakeClock())


def _run(db: Database, sql: str, **values: Any) -> list[dict[str, Any]]:
    """One statement as the service runs it: the application role, an admin of ``acme``."""
    params = {
        "team": "acme",
        "scope": "user",
        "owner": "alice",
        "user": None,
        "channel": "c1",
        "source": "alice",
        "confidence": 0.8,
        "status": "active",
        "now": _now(),
        "audit": uuid.uuid4(),
        "embedding": None,
        "embedding_model": None,
        "embedding_dims": None,
        "since": None,
        "digest": b"\x00" * 32,
        **values,
    }
    with db.tenant(AccessContext("acme", "root", elevated=True)) as conn, conn.cursor() as cur:
        cur.execute(sql, params)
        if cur.description is None:
            return []
        names = [c.name for c in cur.description]
        return [dict(zip(names, row, strict=True)) for row in cur.fetchall()]


@pytest.mark.parametrize("release", sorted(PREVIOUS_RELEASES))
def test_a_previous_releases_writes_run_on_the_migrated_schema(
    migrated: tuple[str, Database], release: str
) -> None:
    _, db = migrated
    svc = _service(db)
    # a key the new code rejected: the previous release may still write it
    rejected = svc.jobs.propose("acme", "alice", None, "hobby", "chess", 0.8, "c1")
    assert rejected is not None
    svc.review.reject(ADMIN, rejected.id)
    for key in ("city", "hobby"):
        row_id = uuid.uuid4()
        for n, sql in enumerate(PREVIOUS_RELEASES[release]):
            rows = _run(db, sql, id=row_id, key=key, value=f"v{n}", status="archived")
            if sql.lstrip().startswith("INSERT INTO memories") and rows:
                row_id = rows[0]["id"]  # the key's row, whichever statement made it
            # what it wrote has the identity the new code finds it by
            if sql in (_INSERT_0016, _RENAME_0016, _RENAME_BACK_0016):
                with psycopg.connect(migrated[0]) as conn:
                    canon = conn.execute(
                        "SELECT key, COALESCE(key_canonical, key) FROM memories WHERE id = %s",
                        (row_id,),
                    ).fetchone()
                assert canon is not None
                assert canon[1] == canonical_key(canon[0])
    with psycopg.connect(migrated[0]) as conn:
        left = conn.execute("SELECT key FROM memories ORDER BY key").fetchall()
        assert conn.execute(USAGE).fetchall() == conn.execute(RECOUNT).fetchall()
    assert left == []  # every key went through to its deletion


def _raw_memory(conn: psycopg.Connection[Any], key: str, value: str, status: str, at: str) -> str:
    memory_id = str(uuid.uuid4())
    conn.execute(
        "INSERT INTO memories (id, team_id, scope, owner_id, key, value, status, created_at,"
        " updated_at) VALUES (%s, 'acme', 'user', 'alice', %s, %s, %s, %s, %s)",
        (memory_id, key, value, status, at, at),
    )
    return memory_id


def test_0010_keeps_one_row_per_key_and_every_rejection(
    each_database_url: str, monkeypatch: pytest.MonkeyPatch
) -> None:
    """A database at 0009 may hold a rejected row beside the live row of its key, and two
    rejected rows of one key: the live row and the latest rejection stay, every rejected
    value stays refused, the counters are unchanged."""
    _migrate(each_database_url, up_to=9, monkeypatch=monkeypatch)
    with psycopg.connect(each_database_url) as conn:
        shadowed = _raw_memory(conn, "hobby", "chess", "rejected", "2026-01-01T00:00:00Z")
        live = _raw_memory(conn, "hobby", "go", "pending_review", "2026-01-02T00:00:00Z")
        older = _raw_memory(conn, "diet", "keto", "rejected", "2026-01-01T00:00:00Z")
        newer = _raw_memory(conn, "diet", "vegan", "rejected", "2026-01-02T00:00:00Z")
        counters = conn.execute(USAGE).fetchall()
    _migrate(each_database_url, monkeypatch=monkeypatch)
    with psycopg.connect(each_database_url) as conn:
        ids = {r[0] for r in conn.execute("SELECT id::text FROM memories").fetchall()}
        assert ids == {live, newer}
        assert {shadowed, older}.isdisjoint(ids)
        assert conn.execute(USAGE).fetchall() == counters == conn.execute(RECOUNT).fetchall()
        [(definition,)] = conn.execute(
            "SELECT pg_get_indexdef(i.indexrelid) FROM pg_index i JOIN pg_class c"
            " ON c.oid = i.indexrelid WHERE c.relname = 'memories_dedup'"
        ).fetchall()
    assert "UNIQUE" in definition
    assert "WHERE" not in definition  # an arbiter for an ON CONFLICT without a predicate
    db = Database(each_database_url, max_size=2, connect_timeout_s=3, statement_timeout_ms=5000)
    try:
        svc = _service(db)
        for key, value in (("hobby", "chess"), ("diet", "keto"), ("diet", "vegan")):
            assert svc.jobs.propose("acme", "alice", None, key, value, 0.8, "c9") is None
        assert svc.jobs.propose("acme", "alice", None, "diet", "paleo", 0.8, "c9") is not None
    finally:
        db.close()


def test_a_run_is_applied_whole_or_not_at_all(
    database_url: str, monkeypatch: pytest.MonkeyPatch
) -> None:
    """The pending migrations of one run are one transaction: running code never sees the
    schema between two of them, and a run that fails leaves the database as it was."""
    _migrate(database_url, up_to=6, monkeypatch=monkeypatch)
    shipped = migrate.load_migrations()
    broken = migrate.Migration(9999, "broken", "SELECT * FROM no_such_table;")
    monkeypatch.setattr(migrate, "load_migrations", lambda: [*shipped, broken])
    with pytest.raises(psycopg.errors.UndefinedTable):
        migrate.apply_migrations(database_url, embedding_dimensions=DIMS)
    monkeypatch.setattr(migrate, "load_migrations", lambda: shipped)
    with psycopg.connect(database_url) as conn:
        versions = conn.execute("SELECT max(version) FROM engram_migrations").fetchone()
        tables = conn.execute("SELECT to_regclass('memory_suppressions')").fetchone()
    assert versions == (6,)
    assert tables == (None,)  # 0007 did not stay applied either
    applied = migrate.apply_migrations(database_url, embedding_dimensions=DIMS)
    assert applied == [f"{m.version:04d}_{m.name}" for m in shipped if m.version > 6]


def test_0018_merges_the_spellings_of_one_key_keeping_every_value(
    each_database_url: str, monkeypatch: pytest.MonkeyPatch
) -> None:
    """A database at 0016 may hold one memory under several spellings of its key: 0018 keeps
    the newest value current and the others as its earlier versions, records each merge,
    moves their audit rows, and suppresses a rejected value under every spelling."""
    _migrate(each_database_url, up_to=16, monkeypatch=monkeypatch)
    spellings = [
        ("favourite editor", "vim", "2026-01-01T00:00:00Z"),
        ("favourite_editor", "emacs", "2026-01-02T00:00:00Z"),
        ("Favourite-Editor", "helix", "2026-01-03T00:00:00Z"),
        ("ＦＡＶＯＵＲＩＴＥ EDITOR", "zed", "2026-01-04T00:00:00Z"),
    ]
    with psycopg.connect(each_database_url) as conn:
        ids = [_raw_memory(conn, k, v, "active", at) for k, v, at in spellings]
        alone = _raw_memory(conn, "city", "Lyon", "active", "2026-01-01T00:00:00Z")
        _raw_memory(conn, "Home Town", "Leeds", "rejected", "2026-01-01T00:00:00Z")
        conn.execute(
            "INSERT INTO review_actions (id, team_id, memory_id, actor_id, action, at)"
            " VALUES (%s, 'acme', %s, 'alice', 'update', now())",
            (uuid.uuid4(), ids[0]),
        )
        counters = conn.execute(USAGE).fetchall()
    assert counters  # four rows under one key count four times before the merge
    _migrate(each_database_url, monkeypatch=monkeypatch)
    with psycopg.connect(each_database_url) as conn:
        rows = conn.execute(
            "SELECT id::text, key, value, version FROM memories"
            " WHERE COALESCE(key_canonical, key) = 'favourite editor'"
        ).fetchall()
        versions = conn.execute(
            "SELECT version, key, value, actor_kind, surface, valid_to IS NULL FROM"
            " memory_versions WHERE memory_id = %s ORDER BY version",
            (ids[-1],),
        ).fetchall()
        moved = conn.execute(
            "SELECT action FROM review_actions WHERE memory_id = %s ORDER BY seq", (ids[-1],)
        ).fetchall()
        seeded = conn.execute(
            "SELECT version, value FROM memory_versions WHERE memory_id = %s", (alone,)
        ).fetchall()
        assert conn.execute(USAGE).fetchall() == conn.execute(RECOUNT).fetchall()
        unique = conn.execute(
            "SELECT indisunique FROM pg_index i JOIN pg_class c ON c.oid = i.indexrelid"
            " WHERE c.relname = 'memories_key'"
        ).fetchone()
    assert rows == [(ids[-1], "ＦＡＶＯＵＲＩＴＥ EDITOR", "zed", 4)]
    assert versions == [
        (1, "favourite editor", "vim", "maintenance", "maintenance", False),
        (2, "favourite_editor", "emacs", "maintenance", "maintenance", False),
        (3, "Favourite-Editor", "helix", "maintenance", "maintenance", False),
        (4, "ＦＡＶＯＵＲＩＴＥ EDITOR", "zed", "maintenance", "maintenance", True),
    ]
    assert moved == [("update",), ("merge",), ("merge",), ("merge",)]
    assert seeded == [(1, "Lyon")]  # history starts at the state it had
    assert unique == (True,)
    db = Database(each_database_url, max_size=2, connect_timeout_s=3, statement_timeout_ms=5000)
    try:
        svc = _service(db)
        caller = Caller(user_id="alice", team_id="acme")
        assert svc.histories.history(caller, ids[-1]).page.recorded_from == 1
        for spelling in ("home_town", "HOME-TOWN"):
            assert svc.jobs.propose("acme", "alice", None, spelling, "Leeds", 0.8, "c9") is None
        again = svc.save(caller, SaveMemory(key="favourite editor", value="nano"))
        assert (again[0].id, again[1], again[0].version) == (ids[-1], False, 5)
    finally:
        db.close()


def test_the_databases_key_rule_agrees_with_the_services(
    migrated: tuple[str, Database],
) -> None:
    """What the previous release writes during a deploy gets its identity from the database's
    statement of the rule: the service's own, except where case folding and lower-casing
    differ (``ß``)."""
    keys = [
        "favourite editor",
        "favourite_editor",
        "Favourite-Editor",
        "ＦＡＶＯＵＲＩＴＥ EDITOR",
        "  spaced\tout\n key ",
        "«quoted»",
        "e-mail address!",
        "C++ version",
        "café au lait",
    ]
    with psycopg.connect(migrated[0]) as conn:
        found = [
            conn.execute("SELECT engram_key_canonical(%s)", (k,)).fetchone()[0]  # type: ignore[index]
            for k in keys
        ]
    assert found == [canonical_key(k) for k in keys]
