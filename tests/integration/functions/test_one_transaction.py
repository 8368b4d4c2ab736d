"""Each memory use case is one unit of work: a save, a PATCH, a review decision, a bulk review
of 20, the approval of a change proposal, a merge, an erasure and a session start each run in
exactly one tenant transaction.

Through the handlers (real Redis, embedded PostgreSQL). On PostgreSQL the transactions are
counted by the server itself: ``pg_stat_database`` (commits plus rollbacks of the test's
database), read once the pool's connections have closed (a backend flushes its statistics
when it exits), less the transactions a new connection's start-up runs (measured here). On
the in-memory store (given to the same container) the store counts the units of work begun.
"""

from __future__ import annotations

import time
from collections.abc import Callable, Iterator
from dataclasses import dataclass
from typing import Any

import psycopg
import pytest
from psycopg.conninfo import conninfo_to_dict, make_conninfo
from tests.integration.functions.conftest import Stack, installed, make_stack, settings_for
from tests.support.services import RedisTarget

from engram.adapters.inmemory_memories import InMemoryMemoryStore

ADMIN = ("engram-team-admins",)
#: reads in a row (50 ms apart) that must agree before the statistics count as settled
STEADY = 8


@pytest.fixture
def redis_target(standalone_redis: RedisTarget) -> RedisTarget:
    """The standalone server only: what is counted is PostgreSQL's."""
    return standalone_redis


class ServerCounter:
    """Transactions the server ran in one database, from its own statistics."""

    def __init__(self, stack: Stack) -> None:
        url = stack.settings.database_url
        assert url is not None
        self.database = conninfo_to_dict(url)["dbname"]
        self._stats_url = make_conninfo(url, dbname="postgres")
        self._stack = stack
        # the requests' transactions only: an autovacuum worker's count too (of the catalogs
        # a fresh database's migrations churned, say) but open no session, so none may run
        self._autovacuum(on=False)
        # the pool may open one connection or two for a single request (it grows while the
        # first is still connecting), so the start-up cost is per session, not per request
        xacts, opened = self._measure(self._connect_only)
        assert opened >= 1
        assert xacts % opened == 0, (xacts, opened)
        self.per_connection = xacts // opened

    def _autovacuum(self, *, on: bool) -> None:
        with psycopg.connect(self._stats_url, autocommit=True) as conn:
            conn.execute(
                "ALTER SYSTEM RESET autovacuum" if on else "ALTER SYSTEM SET autovacuum = off"
            )
            conn.execute("SELECT pg_reload_conf()")

    def close(self) -> None:
        self._autovacuum(on=True)

    def _connect_only(self) -> None:
        with self._stack.container.database.pool.connection():
            pass

    def _read(self, *, sessions_at_least: int = 0) -> tuple[int, int]:
        """(commits + rollbacks, sessions), once no backend is connected to the database, at
        least ``sessions_at_least`` sessions have ended, and the numbers have stayed the same
        for ``STEADY`` reads in a row: a backend flushes its statistics as it exits, which may
        land just after it leaves ``pg_stat_activity``."""
        self._stack.container.database.close()
        last: tuple[int, int] | None = None
        steady = 0
        with psycopg.connect(self._stats_url, autocommit=True) as conn:
            for _ in range(400):
                busy, xacts, sessions = conn.execute(
                    "SELECT (SELECT count(*) FROM pg_stat_activity WHERE datname = %(db)s),"
                    " xact_commit + xact_rollback, sessions FROM pg_stat_database"
                    " WHERE datname = %(db)s",
                    {"db": self.database},
                ).fetchone()  # type: ignore[misc]
                settled = busy == 0 and sessions >= sessions_at_least and (xacts, sessions) == last
                steady = steady + 1 if settled else 0
                if steady >= STEADY:
                    assert last is not None
                    return last
                last = (xacts, sessions)
                time.sleep(0.05)
        raise AssertionError("the server's statistics did not settle")

    def _measure(self, action: Callable[[], object]) -> tuple[int, int]:
        """(transactions, sessions) the database ran while ``action`` did; the sessions the
        pool opened (which it reports) must all have ended and been counted."""
        xacts, sessions = self._read()
        action()
        stats = self._stack.container.database.pool.get_stats()
        opened = stats.get("connections_num", 0) - stats.get("connections_errors", 0)
        xacts_after, sessions_after = self._read(sessions_at_least=sessions + opened)
        return xacts_after - xacts, sessions_after - sessions

    def count(self, action: Callable[[], object]) -> int:
        xacts, sessions = self._measure(action)
        return xacts - sessions * self.per_connection


class StoreCounter:
    """Units of work the in-memory store began."""

    def __init__(self, store: InMemoryMemoryStore) -> None:
        self._store = store

    def close(self) -> None:
        pass

    def count(self, action: Callable[[], object]) -> int:
        before = self._store.transactions
        action()
        return self._store.transactions - before


@dataclass
class World:
    stack: Stack
    counter: ServerCounter | StoreCounter

    def call(self, route: str, *, admin: bool = False, expect: int = 200, **kw: Any) -> Any:
        res = self.stack.call(route, groups=ADMIN if admin else (), **kw)
        assert res.status == expect, res.body
        return res.body

    def proposals(self, n: int) -> list[str]:
        jobs = self.stack.container.memories.jobs
        found = [jobs.propose("acme", "alice", None, f"fact {i}", "x", 0.8, "c1") for i in range(n)]
        return [m.id for m in found if m is not None]

    def transactions(self, action: Callable[[], object]) -> int:
        return self.counter.count(action)


@pytest.fixture(params=["postgres", "inmemory"])
def world(
    request: pytest.FixtureRequest, redis_target: RedisTarget, migrated_url: str, tmp_path: Any
) -> Iterator[World]:
    settings = settings_for(redis_target, migrated_url, tmp_path)
    parts: dict[str, Any] = {}
    if request.param == "inmemory":
        parts["memory_store"] = InMemoryMemoryStore()
    built = make_stack(settings, parts=parts)
    with installed(built):
        if request.param == "inmemory":
            counter: ServerCounter | StoreCounter = StoreCounter(parts["memory_store"])
        else:
            counter = ServerCounter(built)
        try:
            yield World(built, counter)
        finally:
            counter.close()


def test_the_counter_sees_every_transaction(world: World) -> None:
    """Two saves are two transactions: the count is of transactions, not of requests."""

    def two_saves() -> None:
        for key in ("a", "b"):
            world.call("POST /v1/memories", body={"key": key, "value": "v"}, expect=201)

    assert world.transactions(two_saves) == 2


def test_each_use_case_is_one_transaction(world: World) -> None:
    saved = world.call("POST /v1/memories", body={"key": "editor", "value": "vim"}, expect=201)
    twin = world.call("POST /v1/memories", body={"key": "text editor", "value": "vim"}, expect=201)
    one, *twenty = world.proposals(21)
    assert len(twenty) == 20
    jobs = world.stack.container.memories.jobs
    change = jobs.propose("acme", "alice", None, "editor", "helix", 0.8, "c1")
    assert change is not None
    world.call(
        "POST /v1/events", body={"events": [{"kind": "query", "text": "royalty"}]}, expect=202
    )

    counts = {
        "save": world.transactions(
            lambda: world.call(
                "POST /v1/memories", body={"key": "tea", "value": "green"}, expect=201
            )
        ),
        "patch": world.transactions(
            lambda: world.call(
                "PATCH /v1/memories/{id}", path={"id": saved["id"]}, body={"value": "helix"}
            )
        ),
        "review": world.transactions(
            lambda: world.call("POST /v1/review/{id}/approve", path={"id": one}, admin=True)
        ),
        "bulk review of 20": world.transactions(
            lambda: world.call(
                "POST /v1/review/bulk", body={"action": "reject", "ids": twenty}, admin=True
            )
        ),
        "session start": world.transactions(
            lambda: world.call("POST /v1/sessions", body={"query": "editor"})
        ),
        "change approval": world.transactions(
            lambda: world.call("POST /v1/review/{id}/approve", path={"id": change.id}, admin=True)
        ),
        "merge": world.transactions(
            lambda: world.call(
                "POST /v1/memories/{id}/merge", path={"id": twin["id"]}, body={"into": saved["id"]}
            )
        ),
        "erasure": world.transactions(lambda: world.call("DELETE /v1/me")),
    }
    assert counts == dict.fromkeys(counts, 1)
