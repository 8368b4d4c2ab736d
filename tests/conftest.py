"""Fixtures shared by every tier. Services are real and started here; none is ever skipped.

Redis: every test asking for ``redis_target`` runs twice, on a standalone ``redis-server`` and
on a 3-shard Redis Cluster (ids ``[standalone]`` / ``[cluster]``), both started once per
session and both under Engram's ACL (``engram.adapters.redis_acl``). A test emptied of state
gets a flushed deployment (``FLUSHDB`` on every primary); tests keep to keys under the ACL's
prefix (``tests.support.services.APP_PREFIX``) and use prefixes of their own below it.
"""

from __future__ import annotations

import uuid
from collections.abc import Iterator
from typing import TYPE_CHECKING

import pytest

from tests.support.services import (
    POSTGRES_VERSIONS,
    EmbeddedPostgres,
    RedisClusterServers,
    RedisServer,
    RedisTarget,
    redis_server,
)

if TYPE_CHECKING:
    from engram.adapters.postgres.pool import Database

REDIS_KINDS = ("standalone", "cluster")


@pytest.fixture(scope="session")
def redis_session_server() -> Iterator[RedisServer]:
    """The standalone redis-server of the whole run."""
    with redis_server() as server:
        yield server


@pytest.fixture(scope="session")
def redis_session_cluster() -> Iterator[RedisClusterServers]:
    """The 3-shard Redis Cluster of the whole run (started on first use)."""
    cluster = RedisClusterServers().start()
    try:
        yield cluster
    finally:
        cluster.stop()


@pytest.fixture(scope="session", params=REDIS_KINDS)
def redis_deployment(request: pytest.FixtureRequest) -> RedisTarget:
    """Each session Redis in turn: pytest runs every test using it once per kind, grouped by
    kind, so each deployment starts once."""
    if request.param == "cluster":
        cluster: RedisClusterServers = request.getfixturevalue("redis_session_cluster")
        return cluster.target()
    server: RedisServer = request.getfixturevalue("redis_session_server")
    return server.target()


@pytest.fixture
def redis_target(redis_deployment: RedisTarget) -> RedisTarget:
    """An empty session Redis (standalone, then cluster); flushed before each test."""
    redis_deployment.flush()
    return redis_deployment


@pytest.fixture
def standalone_redis(redis_session_server: RedisServer) -> RedisTarget:
    """The session's standalone server only, flushed: for tests about something else than
    Redis (PostgreSQL faults, the fault proxy) that need a Redis to run at all."""
    target = redis_session_server.target()
    target.flush()
    return target


@pytest.fixture
def cluster_redis(redis_session_cluster: RedisClusterServers) -> RedisTarget:
    """The session's Redis Cluster only, flushed: for tests about the cluster itself."""
    target = redis_session_cluster.target()
    target.flush()
    return target


@pytest.fixture
def own_redis() -> Iterator[RedisServer]:
    """A private standalone redis-server a test may stop, restart or slow down."""
    with redis_server() as server:
        yield server


@pytest.fixture(scope="session")
def postgres() -> Iterator[EmbeddedPostgres]:
    pg = EmbeddedPostgres().start()
    try:
        yield pg
    finally:
        pg.stop()


@pytest.fixture
def database_url(postgres: EmbeddedPostgres) -> str:
    """A URL to a fresh, empty database of the embedded PostgreSQL."""
    return postgres.create_database(f"t_{uuid.uuid4().hex[:12]}")


@pytest.fixture
def db(database_url: str) -> Iterator[Database]:
    """That database migrated (64-dimension embeddings), behind a small pool."""
    from engram.adapters.postgres.migrate import apply_migrations
    from engram.adapters.postgres.pool import Database

    apply_migrations(database_url, embedding_dimensions=64)
    database = Database(database_url, max_size=3, connect_timeout_s=3, statement_timeout_ms=5000)
    try:
        yield database
    finally:
        database.close()


@pytest.fixture(scope="session")
def postgres16() -> Iterator[EmbeddedPostgres]:
    """PostgreSQL 16 (the major version Aurora runs) with an older pgvector; started only by
    the tests that run on every version (``postgres_each``)."""
    pg = EmbeddedPostgres(version=16).start()
    try:
        yield pg
    finally:
        pg.stop()


@pytest.fixture(scope="session", params=POSTGRES_VERSIONS, ids=lambda v: f"pg{v}")
def postgres_each(request: pytest.FixtureRequest) -> EmbeddedPostgres:
    """Each embedded PostgreSQL version in turn (a test using it runs once per version)."""
    name = "postgres" if request.param == 18 else f"postgres{request.param}"
    server: EmbeddedPostgres = request.getfixturevalue(name)
    return server


@pytest.fixture
def each_database_url(postgres_each: EmbeddedPostgres) -> str:
    """A fresh, empty database on each embedded PostgreSQL version in turn."""
    return postgres_each.create_database(f"t_{uuid.uuid4().hex[:12]}")
