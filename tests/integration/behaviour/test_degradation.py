"""Redis stopped or slow: sessions still answer (degraded), writes fail clearly, fast."""

from __future__ import annotations

import threading
import time

import pytest
import redis
from tests.support.observations import IDENTITY, MakeObs
from tests.support.services import RedisServer

from engram.adapters.redis_client import make_redis
from engram.behaviour.service import BehaviourService
from engram.clock import FakeClock
from engram.errors import Unavailable
from engram.settings import Settings

SLACK_S = 0.4  # generous: thread hand-off and a loaded 2-core CI machine


def service(server: RedisServer, clock: FakeClock, budget_ms: int = 500) -> BehaviourService:
    settings = Settings(redis_url=server.url, consolidation_budget_ms=budget_ms)
    svc = BehaviourService.from_settings(settings)
    svc.clock = clock
    return svc


def timed(fn, *args):  # type: ignore[no-untyped-def]
    started = time.monotonic()
    result = fn(*args)
    return result, time.monotonic() - started


def test_session_with_redis_stopped_is_degraded_not_an_error(
    own_redis: RedisServer, clock: FakeClock, make_obs: MakeObs
) -> None:
    svc = service(own_redis, clock)
    svc.record(IDENTITY, [make_obs("tool_success", "a")])
    assert svc.load_memory(IDENTITY).degraded == []
    own_redis.stop()
    load, elapsed = timed(svc.load_memory, IDENTITY)
    assert load.degraded == ["behaviour:unavailable"]
    assert (load.facts, load.prompt_section, load.tool_affinities) == ([], "", {})
    assert elapsed < 0.5 + SLACK_S
    with pytest.raises(Unavailable):
        svc.record(IDENTITY, [make_obs("tool_success", "b")])
    svc.emit(IDENTITY, make_obs("tool_success", "c"))  # swallowed
    svc.drain(timeout_s=5)
    assert svc.failed == 1
    # Redis comes back (empty: it keeps nothing on disk): the service recovers by itself
    own_redis.restart()
    svc.record(IDENTITY, [make_obs("tool_success", "d")])
    load = svc.load_memory(IDENTITY)
    assert load.degraded == []
    assert [f.subject for f in load.facts] == ["tool_affinity:d"]
    svc.close()


@pytest.mark.parametrize("budget_ms", [100, 500])
def test_session_with_a_slow_redis_returns_within_the_budget(
    own_redis: RedisServer, clock: FakeClock, make_obs: MakeObs, budget_ms: int
) -> None:
    svc = service(own_redis, clock, budget_ms=budget_ms)
    svc.record(IDENTITY, [make_obs("tool_success", "a")])
    admin = redis.Redis.from_url(own_redis.admin_url)
    admin.execute_command("CLIENT", "PAUSE", 1500, "ALL")  # every command stalls
    admin.close()
    load, elapsed = timed(svc.load_memory, IDENTITY)
    assert load.degraded in (["behaviour:timeout"], ["behaviour:unavailable"])
    assert load.facts == []
    assert elapsed < budget_ms / 1000 + SLACK_S
    svc.close()


def test_budget_shorter_than_the_socket_timeout_reports_a_timeout(
    own_redis: RedisServer, clock: FakeClock, make_obs: MakeObs
) -> None:
    svc = service(own_redis, clock, budget_ms=50)
    svc.record(IDENTITY, [make_obs("tool_success", "a")])
    admin = redis.Redis.from_url(own_redis.admin_url)
    admin.execute_command("CLIENT", "PAUSE", 1500, "ALL")
    admin.close()
    load, elapsed = timed(svc.load_memory, IDENTITY)
    assert load.degraded == ["behaviour:timeout"]
    assert elapsed < 0.05 + SLACK_S
    svc.close()


def test_client_factory_gives_up_in_well_under_a_second(own_redis: RedisServer) -> None:
    client = make_redis(Settings(redis_url=own_redis.url))
    assert client.ping() is True
    admin = redis.Redis.from_url(own_redis.admin_url)
    admin.execute_command("CLIENT", "PAUSE", 1500, "ALL")
    admin.close()
    started = time.monotonic()
    with pytest.raises(redis.TimeoutError):
        client.get("engram:k")
    elapsed = time.monotonic() - started
    # 250 ms socket timeout, at most one quick retry: far from redis-py's 5 s x 10 retries
    assert elapsed < 1.0
    client.close()


def test_emits_in_flight_are_drained_on_shutdown(
    own_redis: RedisServer, clock: FakeClock, make_obs: MakeObs
) -> None:
    svc = service(own_redis, clock)
    for i in range(50):
        svc.emit(IDENTITY, make_obs("tool_success", f"t{i % 5}"))
    svc.drain(timeout_s=10)
    assert svc.in_flight == 0
    assert svc.failed == 0
    assert len(svc.load_memory(IDENTITY).facts) == 5
    svc.close()


def test_threads_do_not_leak_across_many_degraded_sessions(
    own_redis: RedisServer, clock: FakeClock
) -> None:
    svc = service(own_redis, clock, budget_ms=50)
    own_redis.stop()
    before = threading.active_count()
    for _ in range(20):
        assert svc.load_memory(IDENTITY).degraded
    assert threading.active_count() <= before + 4
    svc.close()
