"""PostgreSQL going away and coming back; concurrent saves of one key."""

from __future__ import annotations

import threading
import time

import psycopg
import pytest
from psycopg.conninfo import conninfo_to_dict
from tests.integration.memories.conftest import Backend
from tests.support.services import EmbeddedPostgres

from engram.adapters.postgres.migrate import apply_migrations
from engram.adapters.postgres.pool import Database
from engram.adapters.postgres.store import PostgresMemoryStore
from engram.errors import Unavailable
from engram.identity import Caller
from engram.memories.commands import Recall, SaveMemory
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
