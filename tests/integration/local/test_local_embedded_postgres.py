"""The embedded PostgreSQL of the local service: under the data dir, with pgvector, reused."""

from __future__ import annotations

import contextlib
import os
import signal
import subprocess
import sys
import time
from pathlib import Path

import httpx
import psycopg
import pytest
from tests.support.services import free_port

from engram.adapters.embedded import database_url, embedded_postgres
from engram.settings import Settings

pytestmark = pytest.mark.integration
REPO = Path(__file__).resolve().parents[3]


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


def _serve(data_dir: Path, log: Path) -> tuple[subprocess.Popen[bytes], str]:
    port = free_port()
    env = {k: v for k, v in os.environ.items() if not k.startswith("ENGRAM_")}
    env.pop("REDIS_URL", None)  # the embedded in-process Redis: no server to share
    env.update(
        {
            "ENGRAM_DATA_DIR": str(data_dir),
            "ENGRAM_PORT": str(port),
            "ENGRAM_MAINTENANCE_INTERVAL_S": "3600",
            "PYTHONPATH": os.pathsep.join([str(REPO / "shared"), str(REPO)]),
        }
    )
    with log.open("ab") as out:
        proc = subprocess.Popen(
            [sys.executable, "-m", "functions.local", "serve"],
            cwd=REPO,
            env=env,
            stdout=out,
            stderr=subprocess.STDOUT,
        )
    url = f"http://127.0.0.1:{port}/v1/health"
    deadline = time.monotonic() + 90
    while time.monotonic() < deadline:
        assert proc.poll() is None, log.read_text(errors="replace")[-3000:]
        with contextlib.suppress(httpx.HTTPError):
            if httpx.get(url, timeout=2).json().get("postgres") == "ok":
                return proc, url
        time.sleep(0.2)
    proc.kill()
    raise AssertionError("engram serve did not become healthy: " + log.read_text()[-3000:])


def _postmaster(data_dir: Path) -> int | None:
    pid_file = data_dir / "pg" / "postmaster.pid"
    if not pid_file.exists():
        return None
    return int(pid_file.read_text().splitlines()[0])


def _alive(pid: int) -> bool:
    try:
        os.kill(pid, 0)
    except ProcessLookupError:
        return False
    return True


def test_serve_takes_over_and_stops_the_postgres_a_killed_serve_left_running(
    tmp_path: Path,
) -> None:
    data_dir, log = tmp_path / "data", tmp_path / "serve.log"
    first, _ = _serve(data_dir, log)
    postmaster = _postmaster(data_dir)
    assert postmaster is not None
    first.send_signal(signal.SIGKILL)  # no cleanup at all: its PostgreSQL keeps running
    first.wait(timeout=30)
    assert _alive(postmaster)
    second, url = _serve(data_dir, log)
    try:
        assert _postmaster(data_dir) == postmaster  # taken over, not a second server
        assert httpx.get(url, timeout=60).json()["postgres"] == "ok"
        assert "took over from exited processes" in log.read_text(errors="replace")
    finally:
        second.send_signal(signal.SIGTERM)
        assert second.wait(timeout=60) == 0
    deadline = time.monotonic() + 30
    while _alive(postmaster) and time.monotonic() < deadline:
        time.sleep(0.2)
    left_running = _alive(postmaster)
    if left_running:  # do not leak it past a failing run
        os.kill(postmaster, signal.SIGTERM)
    assert not left_running, "the PostgreSQL of the killed run was left running"
