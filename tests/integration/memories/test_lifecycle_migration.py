"""Migration 0007 over rows written before it, as a migrating role that is not a superuser (as
on RDS): rejections recorded as ``archived`` become ``rejected``, persona rows learnt before
``source_user_id`` existed are attributed when their conversation has exactly one user, the
usage counters start from a recount; and the service then keeps those rules."""

from __future__ import annotations

import json
import uuid
from typing import Any

import psycopg
import pytest
from psycopg.conninfo import make_conninfo
from tests.integration.memories.test_non_superuser_migration import MIGRATOR, _as_rds_master_user
from tests.support.services import EmbeddedPostgres

from engram.adapters.postgres import migrate
from engram.adapters.postgres.pool import Database
from engram.adapters.postgres.store import PostgresMemoryStore
from engram.clock import FakeClock
from engram.identity import Caller
from engram.memories.service import MemoryService
from engram.settings import Settings

T0 = "2026-01-01T00:00:00Z"
RECOUNT = (
    "SELECT m.team_id, s.kind, s.subject, count(*) FROM memories m"
    " CROSS JOIN LATERAL engram_usage_subjects(m.scope, m.owner_id, m.user_id) s"
    " WHERE m.status <> 'rejected' AND s.subject IS NOT NULL GROUP BY 1, 2, 3 ORDER BY 1, 2, 3"
)
USAGE = "SELECT team_id, kind, subject, used FROM memory_usage WHERE used <> 0 ORDER BY 1, 2, 3"


def _migrate(url: str, *, up_to: int | None = None, monkeypatch: pytest.MonkeyPatch) -> None:
    every = migrate.load_migrations
    if up_to is not None:
        monkeypatch.setattr(
            migrate, "load_migrations", lambda: [m for m in every() if m.version <= up_to]
        )
    try:
        migrate.apply_migrations(url, embedding_dimensions=64)
    finally:
        monkeypatch.setattr(migrate, "load_migrations", every)


def _memory(conn: psycopg.Connection[Any], **row: Any) -> str:
    memory_id = str(uuid.uuid4())
    values = {
        "id": memory_id,
        "team_id": "acme",
        "user_id": None,
        "source_channel_id": None,
        "status": "active",
        **row,
    }
    conn.execute(
        "INSERT INTO memories (id, team_id, scope, owner_id, user_id, key, value,"
        " source_channel_id, status, created_at, updated_at) VALUES (%(id)s, %(team_id)s,"
        " %(scope)s, %(owner_id)s, %(user_id)s, %(key)s, %(value)s, %(source_channel_id)s,"
        f" %(status)s, '{T0}', '{T0}')",
        values,
    )
    return memory_id


def _audit(
    conn: psycopg.Connection[Any], memory_id: str, action: str, copy: dict[str, Any]
) -> None:
    conn.execute(
        "INSERT INTO review_actions (id, team_id, memory_id, actor_id, action, before, after, at)"
        f" VALUES (%s, 'acme', %s, 'boss', %s, %s, %s, '{T0}')",
        (uuid.uuid4(), memory_id, action, json.dumps(copy), json.dumps(copy)),
    )


@pytest.fixture
def legacy(
    postgres: EmbeddedPostgres, database_url: str, monkeypatch: pytest.MonkeyPatch
) -> dict[str, str]:
    """Migrated to 0006 by the non-superuser owner, rows written the old way (by the
    superuser, whatever the RLS), then migrated to the end by the owner again."""
    _as_rds_master_user(database_url)
    url = make_conninfo(database_url, user=MIGRATOR)
    _migrate(url, up_to=6, monkeypatch=monkeypatch)
    ids: dict[str, str] = {}
    with psycopg.connect(database_url) as conn:
        ids["rejected"] = _memory(
            conn, scope="user", owner_id="alice", key="hobby", value="chess", status="archived"
        )
        _audit(conn, ids["rejected"], "reject", {"scope": "user", "ownerId": "alice"})
        ids["retired"] = _memory(
            conn, scope="user", owner_id="alice", key="city", value="Lyon", status="archived"
        )
        _audit(conn, ids["retired"], "update", {"scope": "user", "ownerId": "alice"})
        _memory(conn, scope="user", owner_id="alice", key="k", value="v", source_channel_id="c1")
        _memory(conn, scope="user", owner_id="bob", key="k", value="v", source_channel_id="c2")
        _memory(
            conn,
            scope="persona_user",
            owner_id="helpdesk",
            user_id="bob",
            key="k",
            value="v",
            source_channel_id="c2",
            status="pending_review",
        )
        _memory(conn, scope="user", owner_id="carol", key="k", value="v", source_channel_id="c2")
        ids["alices_faq"] = _memory(
            conn, scope="persona", owner_id="helpdesk", key="faq", value="a", source_channel_id="c1"
        )
        ids["shared_faq"] = _memory(
            conn,
            scope="persona",
            owner_id="helpdesk",
            key="faq2",
            value="b",
            source_channel_id="c2",
        )
        _audit(conn, ids["alices_faq"], "update", {"scope": "persona", "value": "a"})
    _migrate(url, monkeypatch=monkeypatch)
    ids["url"] = url
    ids["superuser_url"] = database_url
    return ids


def test_legacy_rows_are_carried_into_the_new_rules(legacy: dict[str, str]) -> None:
    with psycopg.connect(legacy["superuser_url"]) as conn:
        status = dict(conn.execute("SELECT id::text, status FROM memories").fetchall())
        assert status[legacy["rejected"]] == "rejected"
        assert status[legacy["retired"]] == "archived"
        sources = dict(
            conn.execute(
                "SELECT id::text, source_user_id FROM memories WHERE scope = 'persona'"
            ).fetchall()
        )
        # c1 has one user (alice); c2 has two (bob and carol): not attributable
        assert sources == {legacy["alices_faq"]: "alice", legacy["shared_faq"]: None}
        assert conn.execute(USAGE).fetchall() == conn.execute(RECOUNT).fetchall()
        forced = conn.execute(
            "SELECT relforcerowsecurity FROM pg_class WHERE relname = 'review_actions'"
        ).fetchone()
        assert forced == (True,)

    db = Database(legacy["url"], max_size=2, connect_timeout_s=3, statement_timeout_ms=5000)
    try:
        store = PostgresMemoryStore(db, FakeClock())
        svc = MemoryService(store, settings=Settings(), clock=FakeClock())
        assert svc.jobs.propose("acme", "alice", None, "hobby", "chess", 0.8, "c9") is None
        assert svc.jobs.propose("acme", "alice", None, "city", "Lyon", 0.8, "c9") is not None
        counts = svc.erase(Caller(user_id="alice", team_id="acme"))
        assert counts["persona"] == 1  # the faq attributed to alice
        assert counts["review_actions"] == 3  # her two memories' rows and her faq's
    finally:
        db.close()
    with psycopg.connect(legacy["superuser_url"]) as conn:
        left = conn.execute("SELECT scope, owner_id, key FROM memories ORDER BY 1, 2, 3")
        assert left.fetchall() == [
            ("persona", "helpdesk", "faq2"),
            ("persona_user", "helpdesk", "k"),
            ("user", "bob", "k"),
            ("user", "carol", "k"),
        ]
        assert conn.execute("SELECT count(*) FROM review_actions").fetchone() == (0,)
        assert conn.execute(USAGE).fetchall() == conn.execute(RECOUNT).fetchall()
