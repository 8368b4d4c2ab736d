"""`engram migrate` and `engram serve` meet the same local database: with no
``ENGRAM_DATABASE_URL``, both use the embedded PostgreSQL under ``ENGRAM_DATA_DIR``
(``engram.adapters.embedded.database_url``), so what `engram migrate` applied is what the
service finds, and `engram serve` has nothing left to apply."""

from __future__ import annotations

import os
import subprocess
import sys
from collections.abc import Iterator
from pathlib import Path

import psycopg
import pytest
from psycopg.conninfo import conninfo_to_dict

from engram.adapters.embedded import embedded_postgres
from engram.adapters.postgres.migrate import load_migrations
from engram.local.serve import prepare_database
from engram.settings import Settings

ALL = [f"{m.version:04d}_{m.name}" for m in load_migrations()]


@pytest.fixture
def data_dir(tmp_path: Path) -> Iterator[Path]:
    root = tmp_path / "engram-data"
    try:
        yield root
    finally:
        embedded_postgres(Settings(data_dir=root, database_url=None)).stop()


def engram(*args: str, data_dir: Path) -> subprocess.CompletedProcess[str]:
    env = {k: v for k, v in os.environ.items() if not k.startswith("ENGRAM_")}
    env["ENGRAM_DATA_DIR"] = str(data_dir)
    return subprocess.run(
        [sys.executable, "-m", "engram.cli", *args],
        env=env,
        capture_output=True,
        text=True,
        timeout=180,
        check=False,
    )


def versions(url: str) -> list[str]:
    with psycopg.connect(url) as conn:
        rows = conn.execute("SELECT version, name FROM engram_migrations ORDER BY version")
        return [f"{v:04d}_{n}" for v, n in rows.fetchall()]


def test_engram_migrate_then_serve_see_the_same_migrations(
    data_dir: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    migrated = engram("migrate", data_dir=data_dir)
    assert migrated.returncode == 0, migrated.stderr
    assert migrated.stdout.strip() == "applied: " + ", ".join(ALL)

    # what `engram serve` does before it listens, in a process of its own
    settings = Settings(data_dir=data_dir, database_url=None)
    url = prepare_database(settings)
    assert "migrated" not in capsys.readouterr().err  # nothing left to apply
    assert versions(url) == ALL
    assert conninfo_to_dict(url)["dbname"] == "engram"

    again = engram("migrate", data_dir=data_dir)
    assert again.returncode == 0, again.stderr
    assert again.stdout.strip() == "up to date"
