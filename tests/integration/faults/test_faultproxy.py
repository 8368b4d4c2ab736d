"""The fault proxy itself, against a real redis-server and the embedded PostgreSQL."""

from __future__ import annotations

import itertools
import os
import socket
import stat
import threading
import time
from collections.abc import Callable, Iterator

import psycopg
import pytest
import redis
from redis.backoff import NoBackoff
from redis.retry import Retry
from tests.support.faultproxy import FaultProxy, Mode
from tests.support.services import (
    APP_PASSWORD,
    APP_USER,
    EmbeddedPostgres,
    RedisServer,
    RedisTarget,
    free_port,
)

pytestmark = pytest.mark.integration


def fast_redis(url: str, timeout: float = 0.2) -> redis.Redis:
    """redis-py 8 defaults to 5 s timeouts and retries; faults must surface at once."""
    return redis.Redis.from_url(
        url,
        socket_timeout=timeout,
        socket_connect_timeout=timeout,
        retry=Retry(NoBackoff(), 0),
        health_check_interval=0,
    )


def pg_connect(url: str, timeout_s: int = 2) -> psycopg.Connection[tuple[object, ...]]:
    # libpq's connect_timeout has a floor of 2 seconds
    return psycopg.connect(url, connect_timeout=timeout_s, autocommit=True)


@pytest.fixture
def redis_url(standalone_redis: RedisTarget) -> str:
    """The session's standalone server, flushed (the proxy fronts one server: a cluster
    client would follow the slot map around it)."""
    return standalone_redis.url


@pytest.fixture
def redis_proxy(redis_url: str) -> Iterator[FaultProxy]:
    with FaultProxy.for_redis_url(redis_url) as proxy:
        yield proxy


AUTH_PING = f"AUTH {APP_USER} {APP_PASSWORD}\r\nPING\r\n".encode()
OK_PONG = b"+OK\r\n+PONG\r\n"


def recv_exactly(s: socket.socket, n: int) -> bytes:
    data = b""
    while len(data) < n and (chunk := s.recv(n - len(data))):
        data += chunk
    return data


@pytest.fixture
def pg_proxy(postgres: EmbeddedPostgres) -> Iterator[FaultProxy]:
    with FaultProxy.for_postgres_url(postgres.url()) as proxy:
        yield proxy


def ping_raw(address: tuple[str, int]) -> bytes:
    """One inline PING on a fresh socket; the RST may already hit connect() or only recv()."""
    with socket.create_connection(address, timeout=2) as s:
        s.sendall(AUTH_PING)
        return recv_exactly(s, len(OK_PONG))


def eventually(check: Callable[[], bool], within_s: float = 3.0) -> bool:
    deadline = time.monotonic() + within_s
    while not check():
        if time.monotonic() > deadline:
            return False
        time.sleep(0.02)
    return True


def elapsed(fn: Callable[[], object]) -> float:
    start = time.monotonic()
    fn()
    return time.monotonic() - start


# ---------------------------------------------------------------- pass-through


def test_redis_pass_through_ping_set_get(redis_proxy: FaultProxy, redis_url: str) -> None:
    client = fast_redis(redis_proxy.url_for_redis())
    assert client.ping() is True
    client.set("engram:k", "v")
    assert client.get("engram:k") == b"v"
    # the write reached the real server, not a stand-in
    assert fast_redis(redis_url).get("engram:k") == b"v"
    stats = redis_proxy.stats()
    assert stats.connections == 1
    assert stats.active == 1
    assert stats.bytes_to_upstream > 0
    assert stats.bytes_to_client > 0
    assert stats.bytes_dropped == 0
    assert redis_proxy.mode is Mode.PASS_THROUGH
    client.close()


def test_postgres_over_tcp_to_the_unix_socket_upstream(
    pg_proxy: FaultProxy, database_url: str
) -> None:
    # the embedded server listens on a unix socket only; the proxy is its TCP face
    assert isinstance(pg_proxy.upstream, str)
    assert ".s.PGSQL." in pg_proxy.upstream
    assert stat.S_ISSOCK(os.stat(pg_proxy.upstream).st_mode)
    url = pg_proxy.url_for_postgres()
    assert url.startswith(f"postgresql://postgres:@127.0.0.1:{pg_proxy.port}/")
    with pg_connect(url) as conn:
        assert conn.execute("SELECT 1").fetchone() == (1,)
        assert conn.info.host == "127.0.0.1"
    # another database on the same server, by name
    dbname = database_url.split("?", maxsplit=1)[0].rsplit("/", 1)[1]
    with pg_connect(pg_proxy.url_for_postgres(dbname=dbname)) as conn:
        assert conn.execute("SELECT current_database()").fetchone() == (dbname,)
    assert pg_proxy.stats().connections == 2


# ---------------------------------------------------------------- latency


def test_latency_delays_each_round_trip(redis_proxy: FaultProxy) -> None:
    client = fast_redis(redis_proxy.url_for_redis(), timeout=5)
    assert client.ping()
    redis_proxy.latency(100)
    assert redis_proxy.mode is Mode.LATENCY
    # one request chunk and one reply chunk, each delayed 100 ms
    assert elapsed(client.ping) >= 0.18
    redis_proxy.latency(60, jitter_ms=20)
    assert elapsed(lambda: client.set("engram:k", "v")) >= 0.07  # 2 x (60 - 20) ms at least
    redis_proxy.pass_through()
    assert client.get("engram:k") == b"v"
    client.close()


def test_latency_applies_to_postgres(pg_proxy: FaultProxy) -> None:
    with pg_connect(pg_proxy.url_for_postgres()) as conn:
        pg_proxy.latency(100)
        assert elapsed(lambda: conn.execute("SELECT 1").fetchone()) >= 0.18
        pg_proxy.pass_through()
        assert conn.execute("SELECT 2").fetchone() == (2,)


# ---------------------------------------------------------------- blackhole


def test_blackhole_makes_redis_time_out_then_recovers(
    redis_proxy: FaultProxy, redis_url: str
) -> None:
    existing = fast_redis(redis_proxy.url_for_redis())
    assert existing.ping()
    redis_proxy.blackhole()
    with pytest.raises(redis.TimeoutError):
        existing.set("engram:k", "lost")
    fresh = fast_redis(redis_proxy.url_for_redis())
    with pytest.raises(redis.TimeoutError):
        fresh.ping()  # accepted, read, never answered
    stats = redis_proxy.stats()
    assert stats.bytes_dropped > 0
    # nothing was forwarded: the server never saw the write
    assert fast_redis(redis_url).get("engram:k") is None

    redis_proxy.pass_through()
    assert fresh.ping()
    assert existing.ping()  # redis-py dropped the timed-out connection and reconnects
    # the two abandoned blackholed connections were freed, not kept until stop()
    assert eventually(lambda: redis_proxy.stats().active == 2)


def test_blackhole_makes_postgres_connect_time_out(pg_proxy: FaultProxy) -> None:
    pg_proxy.blackhole()
    started = time.monotonic()
    with pytest.raises(psycopg.OperationalError):
        pg_connect(pg_proxy.url_for_postgres(), timeout_s=2)
    assert time.monotonic() - started >= 1.5  # it waited for the timeout, not refused
    pg_proxy.pass_through()
    with pg_connect(pg_proxy.url_for_postgres()) as conn:
        assert conn.execute("SELECT 1").fetchone() == (1,)


def test_blackhole_with_an_unreachable_upstream_still_swallows() -> None:
    with FaultProxy(("127.0.0.1", free_port())) as proxy:
        proxy.blackhole()
        with socket.create_connection(proxy.address, timeout=0.2) as s:
            s.sendall(b"PING\r\n")
            with pytest.raises(TimeoutError):
                s.recv(16)
        proxy.pass_through()  # now an unreachable upstream resets the client at once
        with pytest.raises(ConnectionResetError):
            ping_raw(proxy.address)
        assert proxy.stats().upstream_failures == 2


# ---------------------------------------------------------------- reset


def test_reset_resets_existing_and_new_connections(redis_proxy: FaultProxy) -> None:
    existing = fast_redis(redis_proxy.url_for_redis())
    assert existing.ping()
    raw = socket.create_connection(redis_proxy.address, timeout=2)
    raw.sendall(AUTH_PING)
    assert recv_exactly(raw, len(OK_PONG)) == OK_PONG

    redis_proxy.reset()
    # RST, not FIN: the peer gets ECONNRESET rather than an orderly end of stream
    with pytest.raises(ConnectionResetError):
        raw.recv(16)
    raw.close()
    with pytest.raises(redis.ConnectionError):
        existing.ping()
    with pytest.raises(ConnectionResetError):
        ping_raw(redis_proxy.address)
    with pytest.raises(redis.ConnectionError):
        fast_redis(redis_proxy.url_for_redis()).ping()
    assert redis_proxy.stats().resets >= 4

    redis_proxy.pass_through()
    assert existing.ping()


def test_reset_gives_postgres_a_connection_error(pg_proxy: FaultProxy) -> None:
    conn = pg_connect(pg_proxy.url_for_postgres())
    pg_proxy.reset()
    with pytest.raises(psycopg.OperationalError):
        conn.execute("SELECT 1")
    conn.close()
    with pytest.raises(psycopg.OperationalError):
        pg_connect(pg_proxy.url_for_postgres())
    pg_proxy.pass_through()
    with pg_connect(pg_proxy.url_for_postgres()) as fresh:
        assert fresh.execute("SELECT 1").fetchone() == (1,)


# ---------------------------------------------------------------- half-open


def test_half_open_forwards_requests_but_drops_replies(
    redis_proxy: FaultProxy, redis_url: str
) -> None:
    client = fast_redis(redis_proxy.url_for_redis())
    assert client.ping()
    redis_proxy.half_open()
    with pytest.raises(redis.TimeoutError):
        client.set("engram:k", "arrived")
    # the request reached the server; only its answer was lost on the way back
    assert fast_redis(redis_url).get("engram:k") == b"arrived"
    assert redis_proxy.stats().bytes_dropped > 0
    redis_proxy.pass_through()
    assert client.get("engram:k") == b"arrived"


# ---------------------------------------------------------------- down, flap


def test_down_refuses_then_recovers_on_the_same_port(redis_proxy: FaultProxy) -> None:
    client = fast_redis(redis_proxy.url_for_redis())
    assert client.ping()
    port = redis_proxy.port
    redis_proxy.down()
    assert redis_proxy.mode is Mode.DOWN
    assert not redis_proxy.listening
    with pytest.raises(ConnectionRefusedError):
        socket.create_connection(redis_proxy.address, timeout=0.5).close()
    with pytest.raises(redis.ConnectionError):
        client.ping()
    with pytest.raises(redis.ConnectionError):
        fast_redis(redis_proxy.url_for_redis()).ping()
    assert redis_proxy.stats().active == 0

    redis_proxy.pass_through()
    assert redis_proxy.port == port
    assert redis_proxy.listening
    assert client.ping()


def test_down_refuses_postgres(pg_proxy: FaultProxy) -> None:
    pg_proxy.down()
    started = time.monotonic()
    with pytest.raises(psycopg.OperationalError):
        pg_connect(pg_proxy.url_for_postgres())
    assert time.monotonic() - started < 1.9  # refused outright, not timed out
    pg_proxy.pass_through()
    with pg_connect(pg_proxy.url_for_postgres()) as conn:
        assert conn.execute("SELECT 1").fetchone() == (1,)


def test_flap_alternates_down_and_up(redis_proxy: FaultProxy) -> None:
    redis_proxy.flap(0.25)
    assert redis_proxy.mode is Mode.FLAP
    assert not redis_proxy.listening  # it starts down
    outcomes: list[bool] = []

    def runs() -> int:
        return 1 + sum(1 for a, b in itertools.pairwise(outcomes) if a != b)

    def seen() -> bool:
        return runs() >= 3 and redis_proxy.stats().transitions >= 3

    # sample until the client has seen it change twice (a loaded machine samples slower)
    deadline = time.monotonic() + 15
    while not seen() and time.monotonic() < deadline:
        client = fast_redis(redis_proxy.url_for_redis())
        try:
            outcomes.append(bool(client.ping()))
        except redis.ConnectionError:
            outcomes.append(False)
        finally:
            client.close()
        time.sleep(0.04)
    assert seen(), outcomes

    redis_proxy.pass_through()  # stops flapping, listening again
    assert redis_proxy.listening
    assert fast_redis(redis_proxy.url_for_redis()).ping()


def test_flapping_redis_server_behind_its_own_proxy(own_redis: RedisServer) -> None:
    # the upstream itself restarting is seen through the proxy as resets, then recovery
    with FaultProxy.for_redis_url(own_redis.url) as proxy:
        client = fast_redis(proxy.url_for_redis())
        assert client.ping()
        own_redis.stop()
        with pytest.raises(redis.ConnectionError):
            client.ping()
        own_redis.start()
        assert client.ping()


# ---------------------------------------------------------------- close_all, lifecycle


def test_close_all_ends_open_connections(redis_proxy: FaultProxy) -> None:
    a = socket.create_connection(redis_proxy.address, timeout=2)
    b = socket.create_connection(redis_proxy.address, timeout=2)
    for s in (a, b):
        s.sendall(AUTH_PING)
        assert recv_exactly(s, len(OK_PONG)) == OK_PONG
    assert redis_proxy.close_all() == 2
    assert a.recv(16) == b""  # an orderly close (FIN)
    c = socket.create_connection(redis_proxy.address, timeout=2)
    c.sendall(AUTH_PING)
    assert recv_exactly(c, len(OK_PONG)) == OK_PONG
    assert redis_proxy.close_all(rst=True) == 1
    with pytest.raises(ConnectionResetError):
        c.recv(16)
    for s in (a, b, c):
        s.close()


def test_stop_leaves_no_thread_and_no_listener(redis_url: str) -> None:
    before = {t.ident for t in threading.enumerate()}
    proxy = FaultProxy.for_redis_url(redis_url)
    with proxy:
        held = socket.create_connection(proxy.address, timeout=2)
        proxy.latency(50)
        address = proxy.address
    assert {t.ident for t in threading.enumerate()} <= before
    with pytest.raises(ConnectionRefusedError):
        socket.create_connection(address, timeout=0.5).close()
    with pytest.raises(ConnectionResetError):  # the held connection went with the proxy
        held.recv(16)
    held.close()
    proxy.stop()  # idempotent
    with pytest.raises(RuntimeError, match="not running"):
        proxy.pass_through()


def test_refuses_to_listen_beyond_loopback_and_parses_urls() -> None:
    with pytest.raises(ValueError, match="listen_host"):
        FaultProxy(("127.0.0.1", 6379), listen_host="0.0.0.0")
    assert FaultProxy.for_redis_url("redis://127.0.0.1:7001/3").upstream == ("127.0.0.1", 7001)
    assert FaultProxy.for_postgres_url("postgresql://u:p@localhost:6543/db").upstream == (
        "localhost",
        6543,
    )
    unix = FaultProxy.for_postgres_url("postgresql://postgres:@/postgres?host=/nonexistent/dir")
    assert unix.upstream == "/nonexistent/dir/.s.PGSQL.5432"
    with pytest.raises(ValueError, match="url"):
        FaultProxy.for_redis_url("http://127.0.0.1:6379")
    with pytest.raises(RuntimeError, match="not started"):
        _ = FaultProxy(("127.0.0.1", 6379)).port
