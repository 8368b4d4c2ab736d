"""PostgreSQL going away and coming back; concurrent writes of one key."""

from __future__ import annotations

import threading
import time

import psycopg
import pytest
from psycopg.conninfo import conninfo_to_dict
from tests.integration.memories.conftest import ADMIN, Backend
from tests.support.concurrency import race
from tests.support.services import EmbeddedPostgres

from engram.adapters.postgres.migrate import apply_migrations
from engram.adapters.postgres.pool import Database
from engram.adapters.postgres.store import PostgresMemoryStore
from engram.errors import Unavailable
from engram.identity import Caller
from engram.memories.commands import ListMemories, Recall, SaveMemory
from engram.memories.service import MemoryService
from engram.settings import Settings

pytestmark = pytest.mark.integration
ALICE = Caller(user_id="alice", team_id="t1")


def test_postgres_down_is_unavailable_and_recovery_needs_no_restart(
    postgres: EmbeddedPostgres, database_url: str
) -> None:
    """The database refuses connections and kills open ones (as a failover or an outage
    would); the service answers ``Unavailable`` and recovers by itself afterwards."""
    name = conninfo_to_dict(database_url)["dbname"]
    apply_migrations(database_url, embedding_dimensions=8)
    db = Database(database_url, max_size=2, connect_timeout_s=1, statement_timeout_ms=2000)
    store = PostgresMemoryStore(db)
    svc = MemoryService(store, settings=Settings())
    try:
        svc.save(ALICE, SaveMemory(key="colour", value="turquoise, saved before the outage"))
        with psycopg.connect(postgres.url(), autocommit=True) as admin:
            admin.execute(f'ALTER DATABASE "{name}" ALLOW_CONNECTIONS false')
            admin.execute(
                "SELECT pg_terminate_backend(pid) FROM pg_stat_activity WHERE datname = %s",
                (name,),
            )
            for _ in range(2):  # killed pooled connections and refused new ones alike
                with pytest.raises(Unavailable):
                    svc.save(ALICE, SaveMemory(key="during", value="cannot be stored"))
            with pytest.raises(Unavailable):
                svc.recall(ALICE, Recall(query="turquoise"))
            admin.execute(f'ALTER DATABASE "{name}" ALLOW_CONNECTIONS true')
        deadline = time.monotonic() + 30
        while True:
            try:
                found = svc.recall(ALICE, Recall(query="turquoise"))
                break
            except Unavailable:
                if time.monotonic() > deadline:
                    raise
                time.sleep(0.2)
        assert [m.value for m in found] == ["turquoise, saved before the outage"]
    finally:
        db.close()


def test_concurrent_saves_of_one_key_make_one_row(backend: Backend) -> None:
    svc = backend.service()
    created: list[bool] = []
    errors: list[BaseException] = []

    def save(i: int) -> None:
        try:
            created.append(svc.save(ALICE, SaveMemory(key="same key", value=f"writer {i}"))[1])
        except BaseException as exc:
            errors.append(exc)

    threads = [threading.Thread(target=save, args=(i,)) for i in range(8)]
    for t in threads:
        t.start()
    for t in threads:
        t.join(30)
    assert errors == []
    assert sorted(created) == [False] * 7 + [True]
    rows = svc.recall(ALICE, Recall(max_results=10))
    assert len(rows) == 1
    assert rows[0].value.startswith("writer ")


def test_proposals_and_a_save_racing_over_a_rejected_row_leave_one_row(backend: Backend) -> None:
    """Six proposals of new values and a save of one key, released together over the key's
    rejected row: every call returns (no deadlock, no duplicate key), the rejected row gives
    way once, and the key ends with one row, the save's, active."""
    svc = backend.service()
    first = svc.jobs.propose("t1", "alice", None, "colour", "teal", 0.8, "c1")
    assert first is not None
    svc.review.reject(ADMIN, first.id)
    proposals = [
        lambda i=i: svc.jobs.propose_outcome("t1", "alice", None, "colour", f"v{i}", 0.8, "c1")
        for i in range(6)
    ]
    results = race(*proposals, lambda: svc.save(ALICE, SaveMemory(key="colour", value="crimson")))
    assert [r for r in results if isinstance(r, BaseException)] == []
    outcomes = sorted(r.outcome for r in results[:6])
    assert outcomes.count("created") <= 1
    rows = svc.list_memories(ALICE, ListMemories(limit=100)).memories
    assert [(m.key, m.value, m.status.value) for m in rows] == [("colour", "crimson", "active")]
