"""Fixtures of the maintenance integration tests: a migrated embedded PostgreSQL database."""

from __future__ import annotations

from collections.abc import Iterator

import pytest

from engram.adapters.postgres.migrate import apply_migrations
from engram.adapters.postgres.pool import Database

DIMS = 64


@pytest.fixture
def db(database_url: str) -> Iterator[Database]:
    apply_migrations(database_url, embedding_dimensions=DIMS)
    database = Database(database_url, max_size=3, connect_timeout_s=3, statement_timeout_ms=5000)
    try:
        yield database
    finally:
        database.close()
