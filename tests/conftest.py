"""Fixtures shared by every tier. Services are real and started here; none is ever skipped."""

from __future__ import annotations

import os
import uuid
from collections.abc import Iterator

import pytest

from tests.support.services import POSTGRES_VERSIONS, EmbeddedPostgres, RedisServer, redis_server


@pytest.fixture(scope="session")
def redis_session_server() -> Iterator[RedisServer | None]:
    """A redis-server for the whole run (``REDIS_URL`` wins when set)."""
    if os.environ.get("REDIS_URL"):
        yield None
        return
    with redis_server() as server:
        yield server


@pytest.fixture
def redis_url(redis_session_server: RedisServer | None) -> str:
    """A URL to an empty Redis database; flushed before each test."""
    import redis

    url = os.environ.get("REDIS_URL") or (redis_session_server.url if redis_session_server else "")
    client = redis.Redis.from_url(url, socket_timeout=2)
    client.flushdb()
    client.close()
    return url


@pytest.fixture
def own_redis() -> Iterator[RedisServer]:
    """A private redis-server a test may stop, restart or slow down."""
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
