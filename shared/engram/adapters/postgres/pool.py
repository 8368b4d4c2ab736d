"""A lazily opened psycopg 3 pool and the per-transaction tenant context (RLS settings).

Nothing connects at import or construction; the pool opens on first use. Server-side prepared
statements are off (``prepare_threshold=None``) so RDS Proxy can multiplex connections; the
statement timeout is set per transaction (``SET LOCAL``), which RDS Proxy does not pin on.

Credentials that rotate: ``conninfo`` may be a callable (``engram.adapters.secrets
.DatabaseLogin.conninfo``, the cached secret), called for every new connection, and
``refreshed`` one that reads the secret again; a login the server refuses (the password or
the user of the secret changed) is then retried once at once with what it returns, so a warm
pool opens its next connection with the rotated credentials instead of failing until the
cache expires. Connections already open are not affected by a password change.
"""

from __future__ import annotations

import threading
from collections.abc import Callable, Iterator
from contextlib import contextmanager, suppress
from typing import Any, Self

import psycopg
import psycopg_pool
from psycopg import errors as pg_errors
from psycopg import pq, sql

from engram.errors import Forbidden, Unavailable
from engram.memories.ports import AccessContext
from engram.settings import Settings

APP_ROLE = "engram_app"

#: fragments of the server's message when it refuses a login (libpq reports no SQLSTATE for
#: them): a wrong password, an unknown role, and RDS Proxy holding no secret for the role
_REFUSED_LOGIN = ("authentication failed", "does not exist", "no credentials for the role")


def refused_login(exc: psycopg.OperationalError) -> bool:
    message = str(exc)
    return "FATAL" in message and any(fragment in message for fragment in _REFUSED_LOGIN)


def _reading_again(refreshed: Callable[[], str]) -> type[psycopg.Connection[Any]]:
    """A connection class that, when the login is refused, logs in once more with the
    conninfo ``refreshed`` returns."""

    class Connection(psycopg.Connection[Any]):
        @classmethod
        def connect(cls, conninfo: str = "", **kwargs: Any) -> Self:
            try:
                return super().connect(conninfo, **kwargs)
            except psycopg.OperationalError as exc:
                if not refused_login(exc):
                    raise
                return super().connect(refreshed(), **kwargs)

    return Connection


#: a transaction's start and its tenant in one message (the simple query protocol takes
#: several statements, with the values bound on the client): one round trip, not two
_TENANT_SQL = sql.SQL(
    "BEGIN; SELECT set_config('role', {}, true), set_config('engram.team_id', {}, true), "
    "set_config('engram.user_id', {}, true), set_config('engram.is_admin', {}, true), "
    "set_config('statement_timeout', {}, true)"
)


class Database:
    def __init__(
        self,
        conninfo: str | Callable[[], str],
        *,
        min_size: int = 0,
        max_size: int = 4,
        connect_timeout_s: int = 3,
        statement_timeout_ms: int = 2000,
        app_role: str = APP_ROLE,
        refreshed: Callable[[], str] | None = None,
    ) -> None:
        self.conninfo = conninfo
        self._refreshed = refreshed
        self._min = min_size
        self._max = max(max_size, 1)
        self._connect_timeout_s = connect_timeout_s
        self._statement_timeout_ms = statement_timeout_ms
        self._app_role = app_role
        self._pool: psycopg_pool.ConnectionPool | None = None
        self._lock = threading.Lock()

    @classmethod
    def from_settings(
        cls,
        settings: Settings,
        conninfo: str | Callable[[], str] | None = None,
        *,
        refreshed: Callable[[], str] | None = None,
    ) -> Database:
        url = conninfo or settings.database_url
        if not url:
            raise ValueError("no database URL: set ENGRAM_DATABASE_URL or pass conninfo")
        return cls(
            url,
            min_size=settings.database_pool_min,
            max_size=settings.database_pool_max,
            connect_timeout_s=settings.database_connect_timeout_s,
            statement_timeout_ms=settings.database_statement_timeout_ms,
            refreshed=refreshed,
        )

    def connect_kwargs(self) -> dict[str, Any]:
        # autocommit: ``tenant`` sends BEGIN itself, in the message that sets the tenant
        return {
            "prepare_threshold": None,
            "connect_timeout": self._connect_timeout_s,
            "autocommit": True,
        }

    @property
    def pool(self) -> psycopg_pool.ConnectionPool:
        if self._pool is None:
            with self._lock:
                if self._pool is None:
                    connection_class = (
                        psycopg.Connection
                        if self._refreshed is None
                        else _reading_again(self._refreshed)
                    )
                    pool: psycopg_pool.ConnectionPool = psycopg_pool.ConnectionPool(
                        self.conninfo,
                        connection_class=connection_class,
                        min_size=self._min,
                        max_size=self._max,
                        kwargs=self.connect_kwargs(),
                        timeout=float(self._connect_timeout_s),
                        reconnect_timeout=float(self._connect_timeout_s) * 2,
                        open=False,
                        name="engram",
                    )
                    pool.open(wait=False)
                    self._pool = pool
        return self._pool

    @contextmanager
    def tenant(self, ctx: AccessContext) -> Iterator[psycopg.Connection[Any]]:
        """One transaction acting as the application role for ``ctx`` (RLS applies): it
        commits when the block ends and rolls back when it raises."""
        try:
            with self.pool.connection() as conn:
                settings = (
                    self._app_role,
                    ctx.team_id,
                    ctx.user_id,
                    "on" if ctx.elevated else "off",
                    str(self._statement_timeout_ms),
                )
                try:
                    conn.execute(_TENANT_SQL.format(*map(sql.Literal, settings)))
                    yield conn
                except BaseException:
                    _roll_back(conn)
                    raise
                conn.execute("COMMIT")
        except pg_errors.InsufficientPrivilege as exc:
            raise Forbidden("row-level security refused the write") from exc
        except pg_errors.QueryCanceled as exc:
            raise Unavailable("PostgreSQL statement timed out") from exc
        except (psycopg.OperationalError, psycopg_pool.PoolTimeout) as exc:
            raise Unavailable("PostgreSQL is unavailable") from exc

    def close(self) -> None:
        if self._pool is not None:
            self._pool.close()
            self._pool = None


def _roll_back(conn: psycopg.Connection[Any]) -> None:
    """End the failed block's transaction; a connection that broke is left to the pool,
    which discards it, and the block's own error is the one raised."""
    if conn.closed or conn.info.transaction_status is pq.TransactionStatus.IDLE:
        return
    with suppress(psycopg.Error):
        conn.execute("ROLLBACK")
