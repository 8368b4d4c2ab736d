"""The embedded PostgreSQL of the local service: under the data dir, with pgvector, reused."""

from __future__ import annotations

from pathlib import Path

import psycopg
import pytest

from engram.adapters.embedded import database_url, embedded_postgres
from engram.settings import Settings

pytestmark = pytest.mark.integration


def test_embedded_postgres_under_data_dir(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.delenv("ENGRAM_DATABASE_URL", raising=False)
    settings = Settings(data_dir=tmp_path / "data")
    assert settings.database_url is None
    pg = embedded_postgres(settings)
    try:
        url = database_url(settings)
        assert database_url(settings) == url  # idempotent: the database is reused
        assert (tmp_path / "data" / "pg").is_dir()
        with psycopg.connect(url, autocommit=True) as conn:
            conn.execute("CREATE EXTENSION IF NOT EXISTS vector")
            row = conn.execute("SELECT current_database(), '[1,2]'::vector <-> '[1,3]'::vector")
            assert row.fetchone() == ("engram", 1.0)
    finally:
        pg.stop()


def test_configured_database_url_wins(tmp_path: Path) -> None:
    settings = Settings(data_dir=tmp_path, database_url="postgresql://db.example/engram")
    assert database_url(settings) == "postgresql://db.example/engram"
    assert not (tmp_path / "pg").exists()
