"""One parametrised backend fixture: every conformance test runs on the in-memory adapter and
on the PostgreSQL adapter over the real embedded PostgreSQL (pgvector); a module marked
``EVERY_VERSION`` (the store conformance tests, quotas, review, lifecycle) also on PostgreSQL 16
(the major version Aurora runs)."""

from __future__ import annotations

import uuid
from collections.abc import Iterator
from dataclasses import dataclass

import pytest
from tests.support.services import EmbeddedPostgres

from engram.adapters.inmemory_memories import InMemoryMemoryStore
from engram.adapters.postgres.migrate import apply_migrations
from engram.adapters.postgres.pool import Database
from engram.adapters.postgres.store import PostgresMemoryStore
from engram.clock import FakeClock
from engram.identity import Caller
from engram.memories.ports import Embedder
from engram.memories.recall import HashingEmbedder
from engram.memories.service import MemoryService
from engram.settings import Settings

DIMS = 64

EVERY_VERSION = pytest.mark.parametrize(
    "backend", ["inmemory", "postgres", "postgres16"], indirect=True
)
"""Both stores, and PostgreSQL on 16 too."""

ALICE = Caller(user_id="alice", team_id="t1")
BOB = Caller(user_id="bob", team_id="t1")
ADMIN = Caller(user_id="root", team_id="t1", is_team_admin=True)


@dataclass
class Backend:
    name: str
    store: InMemoryMemoryStore | PostgresMemoryStore
    clock: FakeClock
    url: str | None = None

    def service(self, *, embedder: bool | Embedder = False, **settings: object) -> MemoryService:
        """``embedder``: True for the hashing embedder, or the embedder itself."""
        chosen = HashingEmbedder(DIMS) if embedder is True else embedder or None
        return MemoryService(
            self.store,
            embedder=chosen,
            settings=Settings(**settings),  # type: ignore[arg-type]
            clock=self.clock,
        )


def make_postgres(url: str, clock: FakeClock) -> tuple[PostgresMemoryStore, Database]:
    apply_migrations(url, embedding_dimensions=DIMS)
    db = Database(url, max_size=2, connect_timeout_s=3, statement_timeout_ms=5000)
    return PostgresMemoryStore(db, clock), db


SERVERS = {"postgres": "postgres", "postgres16": "postgres16"}
"""Backend name -> the session fixture of its embedded server (18 and 16)."""


def open_backend(request: pytest.FixtureRequest, kind: str) -> Iterator[Backend]:
    """A backend of ``kind``: ``inmemory``, or a fresh migrated database on a server of
    ``SERVERS``."""
    clock = FakeClock()
    if kind == "inmemory":
        yield Backend("inmemory", InMemoryMemoryStore(clock), clock)
        return
    server: EmbeddedPostgres = request.getfixturevalue(SERVERS[kind])
    url = server.create_database(f"t_{uuid.uuid4().hex[:12]}")
    store, db = make_postgres(url, clock)
    try:
        yield Backend(kind, store, clock, url)
    finally:
        db.close()


@pytest.fixture(params=["inmemory", "postgres"])
def backend(request: pytest.FixtureRequest) -> Iterator[Backend]:
    yield from open_backend(request, request.param)


@pytest.fixture
def pg_backend(database_url: str) -> Iterator[Backend]:
    clock = FakeClock()
    store, db = make_postgres(database_url, clock)
    try:
        yield Backend("postgres", store, clock, database_url)
    finally:
        db.close()
