"""The migration files: one file per version, numbered without gaps."""

from __future__ import annotations

from pathlib import Path

import pytest

from engram.adapters.postgres import migrate


def test_shipped_migrations_are_numbered_once_each_without_gaps() -> None:
    versions = [m.version for m in migrate.load_migrations()]
    assert versions == list(range(1, len(versions) + 1))


def test_two_files_with_one_version_are_refused(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    (tmp_path / "0001_first.sql").write_text("SELECT 1;")
    (tmp_path / "0002_second.sql").write_text("SELECT 2;")
    (tmp_path / "0002_other.sql").write_text("SELECT 3;")
    monkeypatch.setattr(migrate.resources, "files", lambda _package: tmp_path)
    with pytest.raises(RuntimeError, match="0002_other, 0002_second"):
        migrate.load_migrations()
