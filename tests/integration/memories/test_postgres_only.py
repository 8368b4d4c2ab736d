"""What only the PostgreSQL adapter has: RLS a direct SQL read can try to break, migrations,
pool behaviour and an unavailable server."""

from __future__ import annotations

import os
import subprocess
import sys
import threading
from pathlib import Path

import psycopg
import pytest
from tests.integration.memories.conftest import Backend
from tests.support import memory_rows

from engram.adapters.postgres.migrate import apply_migrations, load_migrations, main
from engram.adapters.postgres.pool import Database
from engram.adapters.postgres.store import PostgresMemoryStore
from engram.bootstrap import Container
from engram.errors import Forbidden, Unavailable
from engram.identity import Caller
from engram.memories.commands import Recall, SaveMemory
from engram.memories.models import NewMemory, RecallRequest, Scope
from engram.memories.ports import AccessContext
from engram.settings import Settings

pytestmark = pytest.mark.integration
REPO = Path(__file__).resolve().parents[3]
SHIPPED = [f"{m.version:04d}_{m.name}" for m in load_migrations()]


def _seed(b: Backend) -> None:
    svc = b.service()
    svc.save(Caller(user_id="alice", team_id="t1"), SaveMemory(key="secret", value="alice in t1"))
    svc.save(Caller(user_id="bob", team_id="t2"), SaveMemory(key="secret", value="bob in t2"))
    svc.save(
        Caller(user_id="alice", team_id="t1"),
        SaveMemory(key="pu", value="p note", persona_id="chef"),
    )


def test_app_role_without_tenant_settings_sees_no_rows(pg_backend: Backend) -> None:
    _seed(pg_backend)
    assert pg_backend.url is not None
    with psycopg.connect(pg_backend.url) as conn:
        owner_count = conn.execute("SELECT count(*) FROM memories").fetchone()
        assert owner_count == (3,)  # the rows exist (the test connects as a superuser)
        conn.execute("SET ROLE engram_app")
        assert conn.execute("SELECT count(*) FROM memories").fetchone() == (0,)
        assert conn.execute(
            "SELECT count(*) FROM memories WHERE key = 'secret' OR true"
        ).fetchone() == (0,)
        # a tenant of another team, or another user of the team, still sees nothing of alice
        conn.execute("SELECT set_config('engram.team_id', 't2', false)")
        conn.execute("SELECT set_config('engram.user_id', 'alice', false)")
        rows = conn.execute("SELECT value FROM memories").fetchall()
        assert rows == []
        conn.execute("SELECT set_config('engram.team_id', 't1', false)")
        conn.execute("SELECT set_config('engram.user_id', 'mallory', false)")
        assert conn.execute("SELECT value FROM memories").fetchall() == []
        # claiming admin is a server-side setting the API never lets a caller choose; even
        # so it stays inside the team
        conn.execute("SELECT set_config('engram.is_admin', 'on', false)")
        assert sorted(r[0] for r in conn.execute("SELECT value FROM memories")) == [
            "alice in t1",
            "p note",
        ]
        conn.rollback()


def test_app_role_cannot_write_into_another_tenant(pg_backend: Backend) -> None:
    assert pg_backend.url is not None
    with psycopg.connect(pg_backend.url) as conn:
        conn.execute("SET ROLE engram_app")
        conn.execute("SELECT set_config('engram.team_id', 't1', false)")
        conn.execute("SELECT set_config('engram.user_id', 'mallory', false)")
        with pytest.raises(psycopg.errors.InsufficientPrivilege):
            conn.execute(
                "INSERT INTO memories (id, team_id, scope, owner_id, key, value, created_at,"
                " updated_at) VALUES (gen_random_uuid(), 't1', 'user', 'alice', 'k', 'v',"
                " now(), now())"
            )
        conn.rollback()


def test_store_write_outside_rows_maps_to_forbidden(pg_backend: Backend) -> None:
    bob = AccessContext("t1", "bob")
    with pytest.raises(Forbidden):
        memory_rows.upsert(
            pg_backend.store,
            bob,
            NewMemory(scope=Scope.USER, owner_id="alice", team_id="t1", key="k", value="v"),
        )


def test_tenant_settings_do_not_leak_to_the_next_transaction(database_url: str) -> None:
    apply_migrations(database_url, embedding_dimensions=8)
    db = Database(database_url, max_size=1)
    store = PostgresMemoryStore(db)
    try:
        admin = AccessContext("t1", "root", elevated=True)
        memory_rows.upsert(
            store,
            admin,
            NewMemory(scope=Scope.USER, owner_id="alice", team_id="t1", key="k", value="v"),
        )
        with db.pool.connection() as conn:  # the same (only) pooled connection
            conn.execute("SET ROLE engram_app")
            assert conn.execute("SELECT current_setting('engram.team_id', true)").fetchone() in (
                (None,),
                ("",),
            )
            assert conn.execute("SELECT count(*) FROM memories").fetchone() == (0,)
            conn.rollback()
    finally:
        db.close()


def test_migrations_twice_is_a_no_op_and_leave_the_dimension_to_the_embedder(
    database_url: str,
) -> None:
    assert SHIPPED[0] == "0001_memories"
    assert apply_migrations(database_url, embedding_dimensions=32) == SHIPPED
    assert apply_migrations(database_url, embedding_dimensions=32) == []
    with psycopg.connect(database_url) as conn:
        assert conn.execute("SELECT count(*) FROM engram_migrations").fetchone() == (len(SHIPPED),)
        typ = conn.execute(
            "SELECT format_type(atttypid, atttypmod) FROM pg_attribute"
            " WHERE attrelid = 'memories'::regclass AND attname = 'embedding'"
        ).fetchone()
        assert typ == ("vector",)  # any dimension: each row records its embedder's
        indexes = dict(
            conn.execute(
                "SELECT indexname, indexdef FROM pg_indexes WHERE tablename = 'memories'"
            ).fetchall()
        )
    assert {
        "memories_dedup",
        "memories_fts",
        "memories_primary",
        "memories_persona_user",
        "memories_provenance",
        "memories_vectors",
        "memories_embedding_model_run",
    } <= set(indexes)
    assert "memories_embedding_hnsw" not in indexes  # recall is exact within the user
    # the backlog's index holds no random id: a save appends to the end of its model's run
    assert "memories_embedding_model" not in indexes
    assert indexes["memories_embedding_model_run"].endswith("(embedding_model)")


def test_two_concurrent_engram_migrate_runs_both_succeed(database_url: str) -> None:
    env = {**os.environ, "ENGRAM_DATABASE_URL": database_url, "ENGRAM_EMBEDDING_DIMENSIONS": "16"}
    cmd = [sys.executable, "-m", "engram.cli", "migrate"]
    procs = [
        subprocess.Popen(
            cmd, env=env, cwd=REPO, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True
        )
        for _ in range(2)
    ]
    outs = [p.communicate(timeout=120) for p in procs]
    assert [p.returncode for p in procs] == [0, 0], outs
    assert sorted(o[0].strip() for o in outs) == ["applied: " + ", ".join(SHIPPED), "up to date"]
    with psycopg.connect(database_url) as conn:
        versions = conn.execute("SELECT version FROM engram_migrations ORDER BY version").fetchall()
    assert versions == [(m.version,) for m in load_migrations()]


def test_concurrent_apply_in_threads(database_url: str) -> None:
    results: list[list[str]] = []
    errors: list[BaseException] = []

    def run() -> None:
        try:
            results.append(apply_migrations(database_url, embedding_dimensions=8))
        except BaseException as exc:
            errors.append(exc)

    threads = [threading.Thread(target=run) for _ in range(3)]
    for t in threads:
        t.start()
    for t in threads:
        t.join(60)
    assert errors == []
    assert sorted(len(r) for r in results) == [0, 0, len(SHIPPED)]


def test_migrate_main_reports_a_bad_url(capsys: pytest.CaptureFixture[str], tmp_path: Path) -> None:
    code = main(["--database-url", f"postgresql://postgres@/nope?host={tmp_path}"])
    assert code == 1
    assert "failed" in capsys.readouterr().err


def test_unreachable_postgres_raises_unavailable(tmp_path: Path) -> None:
    db = Database(f"postgresql://postgres@/x?host={tmp_path}", connect_timeout_s=1)
    store = PostgresMemoryStore(db)
    try:
        with pytest.raises(Unavailable):
            memory_rows.recall(
                store, AccessContext("t", "u"), RecallRequest(team_id="t", user_id="u")
            )
    finally:
        db.close()


def test_fts_match_function_keeps_the_tenant_of_the_settings(pg_backend: Backend) -> None:
    """The security-definer full-text helper takes the tenant from the same settings as RLS:
    without them, or with another tenant's, it returns nothing of alice's."""
    _seed(pg_backend)
    assert pg_backend.url is not None
    call = "SELECT count(*) FROM engram_fts_match(to_tsquery('english', %s), %s)"
    with psycopg.connect(pg_backend.url) as conn:
        conn.execute("SET ROLE engram_app")
        assert conn.execute(call, ("secret | note", None)).fetchone() == (0,)
        assert conn.execute(call, ("secret | note", "chef")).fetchone() == (0,)
        conn.execute("SELECT set_config('engram.team_id', 't1', false)")
        conn.execute("SELECT set_config('engram.user_id', 'mallory', false)")
        assert conn.execute(call, ("secret | note", "chef")).fetchone() == (0,)
        conn.execute("SELECT set_config('engram.team_id', 't2', false)")
        conn.execute("SELECT set_config('engram.user_id', 'alice', false)")
        assert conn.execute(call, ("secret | note", "chef")).fetchone() == (0,)
        conn.execute("SELECT set_config('engram.team_id', 't1', false)")
        assert conn.execute(call, ("secret | note", "chef")).fetchone() == (2,)
        conn.rollback()


def test_the_container_composes_memories_on_postgres(database_url: str, tmp_path: Path) -> None:
    apply_migrations(database_url, embedding_dimensions=1024)
    container = Container(Settings(database_url=database_url, data_dir=tmp_path))
    try:
        alice = Caller(user_id="alice", team_id="t1")
        container.memories.save(alice, SaveMemory(key="lang", value="Go"))
        found = container.memories.recall(alice, Recall(query="go"))
        assert [m.value for m in found] == ["Go"]
    finally:
        container.close()
    bedrock = Container(Settings(database_url=database_url, embedder="bedrock", data_dir=tmp_path))
    assert type(bedrock.memories.core.embedder).__name__ == "BedrockTitanEmbedder"
    bedrock.close()  # never opened: nothing connected
