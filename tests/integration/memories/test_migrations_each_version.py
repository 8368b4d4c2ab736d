"""The migrations on each embedded PostgreSQL version: 18 (pgvector 0.8.5) and 16, the major
version Aurora runs (pgvector 0.6.2, older than Aurora's); and the pgvector check that runs
before them."""

from __future__ import annotations

import psycopg
import pytest
from tests.support.services import EmbeddedPostgres

from engram.adapters.postgres import pgvector
from engram.adapters.postgres.migrate import apply_migrations, load_migrations, main

pytestmark = pytest.mark.integration

SHIPPED = [f"{m.version:04d}_{m.name}" for m in load_migrations()]


def test_every_migration_applies_once(
    postgres_each: EmbeddedPostgres, each_database_url: str
) -> None:
    assert apply_migrations(each_database_url, embedding_dimensions=64) == SHIPPED
    assert apply_migrations(each_database_url, embedding_dimensions=64) == []
    with psycopg.connect(each_database_url) as conn:
        version = conn.execute("SHOW server_version").fetchone()
        assert version is not None
        assert version[0].startswith(f"{postgres_each.version}.")
        found = pgvector.probe(conn)
        assert found.installed is not None
        assert pgvector.parse_version(found.installed) >= pgvector.MINIMUM
        assert found.check() == []
        kinds = dict(
            conn.execute(
                "SELECT c.relname, am.amname FROM pg_class c JOIN pg_am am ON am.oid = c.relam"
                " WHERE c.relname LIKE 'memories_%'"
            ).fetchall()
        )
        fts = conn.execute(
            "SELECT reloptions FROM pg_class WHERE relname = 'memories_fts'"
        ).fetchone()
    # no approximate vector index (recall is exact within the user); full text without the
    # pending list that made some saves slow
    assert "hnsw" not in kinds.values()
    assert "ivfflat" not in kinds.values()
    assert kinds["memories_fts"] == "gin"
    assert fts == (["fastupdate=off"],)


def test_the_16_server_has_the_older_pgvector(postgres16: EmbeddedPostgres) -> None:
    """What the matrix stands for: PostgreSQL 16 with a pgvector older than 0.7 (no halfvec,
    no iterative index scans), on which everything above passes."""
    with psycopg.connect(postgres16.url()) as conn:
        found = pgvector.probe(conn)
        version = conn.execute("SHOW server_version_num").fetchone()
    assert version is not None
    assert 160000 <= int(version[0]) < 170000
    assert found.available is not None
    assert pgvector.MINIMUM <= pgvector.parse_version(found.available) < (0, 7, 0)


@pytest.mark.parametrize(
    ("text", "expected"),
    [("0.8.0", (0, 8, 0)), ("0.6.2", (0, 6, 2)), ("0.5.1-rds.1", (0, 5, 1)), ("1.0", (1, 0))],
)
def test_pgvector_versions_parse(text: str, expected: tuple[int, ...]) -> None:
    assert pgvector.parse_version(text) == expected


def test_a_server_without_pgvector_is_refused_with_the_reason() -> None:
    with pytest.raises(pgvector.PgvectorUnsupported, match="not available on this server"):
        pgvector.Pgvector(available=None, installed=None).check()


def test_a_pgvector_older_than_hnsw_is_refused_naming_both_versions() -> None:
    with pytest.raises(pgvector.PgvectorUnsupported, match=r"0\.4\.4 is older than 0\.5\.0"):
        pgvector.Pgvector(available="0.4.4", installed=None).check()
    with pytest.raises(pgvector.PgvectorUnsupported, match="ALTER EXTENSION vector UPDATE"):
        pgvector.Pgvector(available="0.8.0", installed="0.4.1").check()


def test_an_installed_pgvector_behind_the_servers_is_reported() -> None:
    (notice,) = pgvector.Pgvector(available="0.8.0", installed="0.6.2").check()
    assert "0.6.2 is installed, 0.8.0 is available" in notice


def test_engram_migrate_refuses_a_server_without_pgvector(
    postgres: EmbeddedPostgres, database_url: str, capsys: pytest.CaptureFixture[str]
) -> None:
    """Hidden from the server: the check reads ``pg_available_extensions``, so a view of the
    same name earlier on the search path stands in for a server that lacks pgvector."""
    with psycopg.connect(database_url, autocommit=True) as conn:
        conn.execute("CREATE SCHEMA nopgvector")
        conn.execute(
            "CREATE VIEW nopgvector.pg_available_extensions AS"
            " SELECT * FROM pg_catalog.pg_available_extensions WHERE name <> 'vector'"
        )
    url = f"{database_url}&options=-csearch_path%3Dnopgvector,public,pg_catalog"
    if "?" not in database_url:
        url = url.replace("&", "?", 1)
    assert main(["--database-url", url, "--embedding-dimensions", "64"]) == 1
    assert "pgvector is not available on this server" in capsys.readouterr().err
    with psycopg.connect(database_url) as conn:
        tables = conn.execute("SELECT to_regclass('public.engram_migrations')").fetchone()
    assert tables == (None,)  # nothing was applied
