"""Redis stopped or slow: sessions still answer (degraded) within the session budget, writes
fail clearly, fast. The session use case runs the behavioural half on its executor; its
memory half runs on an in-memory store here, so only the behavioural half degrades."""

from __future__ import annotations

import threading
import time

import pytest
import redis
from tests.support.observations import IDENTITY, MakeObs
from tests.support.services import RedisServer

from engram.adapters.inmemory_memories import InMemoryMemoryStore
from engram.adapters.redis_client import make_redis
from engram.bootstrap import Container
from engram.clock import FakeClock
from engram.errors import Unavailable
from engram.identity import Caller
from engram.memories.service import MemoryService
from engram.settings import Settings
from engram.use_cases.session import SessionContext, SessionService

SLACK_S = 1.5  # generous: thread hand-off and a loaded 2-core CI machine
PAUSE_MS = 4000  # a stall longer than every bound below: a pass returned while Redis was stalled


CALLER = Caller(user_id=IDENTITY.split(":")[1], team_id=IDENTITY.split(":")[0])


class Sessions:
    """Session starts of ``CALLER`` and the behavioural service under them, on ``server``."""

    def __init__(
        self, server: RedisServer, clock: FakeClock, budget_ms: int = 500, **settings_: object
    ) -> None:
        settings = Settings(
            redis_url=server.url,
            consolidation_budget_ms=budget_ms,
            **settings_,  # type: ignore[arg-type]
        )
        self.container = Container(settings, clock=clock)
        self.behaviour = self.container.behaviour
        store = InMemoryMemoryStore(clock)
        memories = MemoryService(store, settings=settings, clock=clock)
        self.sessions = SessionService(self.behaviour, memories, budget_ms=budget_ms)

    def start(self) -> SessionContext:
        return self.sessions.start(CALLER)

    def close(self) -> None:
        self.sessions.close()
        self.container.close()


def timed(fn, *args):  # type: ignore[no-untyped-def]
    started = time.monotonic()
    result = fn(*args)
    return result, time.monotonic() - started


def test_session_with_redis_stopped_is_degraded_not_an_error(
    own_redis: RedisServer, clock: FakeClock, make_obs: MakeObs
) -> None:
    svc = Sessions(own_redis, clock)
    svc.behaviour.record(IDENTITY, [make_obs("tool_success", "a")])
    assert svc.start().degraded == []
    own_redis.stop()
    context, elapsed = timed(svc.start)
    assert context.degraded == ["behaviour:unavailable"]
    assert (context.facts, context.facts_section, context.tool_affinities) == ([], "", {})
    assert elapsed < 0.5 + SLACK_S
    with pytest.raises(Unavailable):
        svc.behaviour.record(IDENTITY, [make_obs("tool_success", "b")])
    # Redis comes back (empty: it keeps nothing on disk): the service recovers by itself
    own_redis.restart()
    svc.behaviour.record(IDENTITY, [make_obs("tool_success", "d")])
    context = svc.start()
    assert context.degraded == []
    assert [f.subject for f in context.facts] == ["tool_affinity:d"]
    svc.close()


@pytest.mark.parametrize("budget_ms", [100, 500])
def test_session_with_a_slow_redis_returns_within_the_budget(
    own_redis: RedisServer, clock: FakeClock, make_obs: MakeObs, budget_ms: int
) -> None:
    svc = Sessions(own_redis, clock, budget_ms=budget_ms)
    svc.behaviour.record(IDENTITY, [make_obs("tool_success", "a")])
    admin = redis.Redis.from_url(own_redis.admin_url)
    admin.execute_command("CLIENT", "PAUSE", PAUSE_MS, "ALL")  # every command stalls
    admin.close()
    context, elapsed = timed(svc.start)
    assert context.degraded in (["behaviour:timeout"], ["behaviour:unavailable"])
    assert context.facts == []
    assert elapsed < budget_ms / 1000 + SLACK_S
    svc.close()


def test_budget_shorter_than_the_socket_timeout_reports_a_timeout(
    own_redis: RedisServer, clock: FakeClock, make_obs: MakeObs
) -> None:
    # the socket would give up after 3 s; the 50 ms budget ends the wait long before
    svc = Sessions(own_redis, clock, budget_ms=50, redis_socket_timeout_ms=3000)
    svc.behaviour.record(IDENTITY, [make_obs("tool_success", "a")])
    admin = redis.Redis.from_url(own_redis.admin_url)
    admin.execute_command("CLIENT", "PAUSE", PAUSE_MS, "ALL")
    admin.close()
    context, elapsed = timed(svc.start)
    assert context.degraded == ["behaviour:timeout"]
    assert elapsed < 0.05 + SLACK_S
    svc.close()


def test_client_factory_gives_up_long_before_redis_py_would(own_redis: RedisServer) -> None:
    client = make_redis(Settings(redis_url=own_redis.url))
    assert client.ping() is True
    admin = redis.Redis.from_url(own_redis.admin_url)
    admin.execute_command("CLIENT", "PAUSE", PAUSE_MS, "ALL")
    admin.close()
    started = time.monotonic()
    with pytest.raises(redis.TimeoutError):
        client.get("engram:k")
    elapsed = time.monotonic() - started
    # 250 ms socket timeout, at most one quick retry: far from redis-py's 5 s x 10 retries
    assert elapsed < 2.0
    client.close()


def test_threads_do_not_leak_across_many_degraded_sessions(
    own_redis: RedisServer, clock: FakeClock
) -> None:
    svc = Sessions(own_redis, clock, budget_ms=50)
    own_redis.stop()
    before = threading.active_count()
    for _ in range(20):
        assert svc.start().degraded
    assert threading.active_count() <= before + 8
    svc.close()
