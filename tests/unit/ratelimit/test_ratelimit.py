"""Per-identity rate limits: the policy over the in-memory store, and the Redis Lua script
(on fakeredis, in-process) agreeing with the pure arithmetic step for step."""

from __future__ import annotations

import time

import fakeredis
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from engram.adapters.redis_ratelimit import (
    InMemoryRateLimitStore,
    RedisRateLimitStore,
    hashed_key,
    observation_limiter,
)
from engram.api.errors import error_response
from engram.clock import FakeClock
from engram.errors import InvalidInput, RateLimited, Unavailable
from engram.ratelimit import Algorithm, Decision, Hit, RateLimiter
from engram.settings import Settings


def limiter(
    limit: int = 10,
    *,
    window_s: int = 60,
    algorithm: Algorithm = "sliding",
    clock: FakeClock | None = None,
    store: object = None,
) -> tuple[RateLimiter, FakeClock]:
    clock = clock or FakeClock()
    built = RateLimiter(
        store or InMemoryRateLimitStore(),  # type: ignore[arg-type]
        limit=limit,
        window_s=window_s,
        algorithm=algorithm,
        clock=clock,
    )
    return built, clock


@pytest.mark.parametrize("algorithm", ["sliding", "fixed"])
def test_admits_up_to_the_limit_then_429_with_retry_after(algorithm: Algorithm) -> None:
    rl, _ = limiter(10, algorithm=algorithm)
    for i in range(10):
        assert rl.check("acme:alice").remaining == 9 - i
    with pytest.raises(RateLimited) as caught:
        rl.check("acme:alice")
    assert 1 <= caught.value.retry_after_s <= 60
    http = error_response(caught.value)
    assert http.status == 429
    assert http.code == "rate_limited"
    assert http.headers["Retry-After"] == str(caught.value.retry_after_s)


@pytest.mark.parametrize("algorithm", ["sliding", "fixed"])
def test_a_refused_batch_consumes_nothing(algorithm: Algorithm) -> None:
    rl, _ = limiter(10, algorithm=algorithm)
    rl.check("acme:alice", cost=7)
    with pytest.raises(RateLimited):
        rl.check("acme:alice", cost=4)  # 11 > 10: all or nothing
    assert rl.check("acme:alice", cost=3).remaining == 0  # the refused 4 were not counted


def test_identities_do_not_share_a_budget() -> None:
    rl, _ = limiter(2)
    rl.check("acme:alice", cost=2)
    assert rl.decide("acme:alice").allowed is False
    assert rl.check("acme:bob", cost=2).allowed
    assert rl.check("other:alice", cost=2).allowed


def test_sliding_window_frees_units_as_they_age_out() -> None:
    rl, clock = limiter(6, window_s=60)
    rl.check("u", cost=4)
    clock.advance(seconds=20)
    rl.check("u", cost=2)
    refused = rl.decide("u")
    assert not refused.allowed
    assert refused.retry_after_ms == 40_000  # when the first 4 leave the window
    assert refused.retry_after_s == 40
    clock.advance(ms=refused.retry_after_ms - 1)
    assert not rl.decide("u").allowed
    clock.advance(ms=1)
    assert rl.check("u", cost=4).remaining == 0  # exactly after the advertised wait
    assert not rl.decide("u").allowed


def test_retry_after_is_honest_for_a_batch() -> None:
    rl, clock = limiter(6, window_s=60)
    for _ in range(6):
        rl.check("u")
        clock.advance(seconds=5)
    # now t0+30 s; entries at 0, 5, ..., 25 s; 3 more units need the first 3 gone (at 70 s)
    refused = rl.decide("u", cost=3)
    assert refused.retry_after_ms == 40_000
    clock.advance(ms=refused.retry_after_ms - 1)
    assert not rl.decide("u", cost=3).allowed
    clock.advance(ms=1)
    assert rl.decide("u", cost=3).allowed


@pytest.mark.parametrize("period_ms", [250, 1_000, 3_300])
def test_sliding_never_admits_more_than_limit_in_any_window(period_ms: int) -> None:
    rl, clock = limiter(5, window_s=10)
    admitted: list[int] = []
    for _ in range(100_000 // period_ms):
        if rl.decide("u").allowed:
            admitted.append(clock.now_ms())
        clock.advance(ms=period_ms)
    for i, start in enumerate(admitted):
        in_window = [t for t in admitted[i:] if t < start + 10_000]
        assert len(in_window) <= 5
    # and it is not stingier than that: the long-run rate is the configured one
    expected = min(100_000 // period_ms, 5 * 100 // 10)
    assert len(admitted) >= expected * 0.8


def test_fixed_window_resets_at_the_boundary() -> None:
    clock = FakeClock(start_ms=60_000 * 1000 + 50_000)  # 10 s before a minute boundary
    rl, _ = limiter(3, algorithm="fixed", clock=clock)
    rl.check("u", cost=3)
    refused = rl.decide("u")
    assert refused.retry_after_ms == 10_000
    clock.advance(seconds=10)
    assert rl.check("u", cost=3).allowed


def test_cost_over_the_limit_is_refused_with_a_full_window() -> None:
    rl, _ = limiter(5)
    with pytest.raises(RateLimited) as caught:
        rl.check("u", cost=6)
    assert caught.value.retry_after_s == 60
    assert "more than the limit" in caught.value.message
    assert rl.check("u", cost=5).allowed  # nothing consumed


@pytest.mark.parametrize("cost", [0, -1])
def test_bad_cost_names_the_field(cost: int) -> None:
    rl, _ = limiter()
    with pytest.raises(InvalidInput) as caught:
        rl.check("u", cost=cost)
    assert caught.value.field == "cost"


def test_bad_configuration_names_the_field() -> None:
    with pytest.raises(InvalidInput) as caught:
        RateLimiter(InMemoryRateLimitStore(), limit=0)
    assert caught.value.field == "limit"
    with pytest.raises(InvalidInput) as caught:
        RateLimiter(InMemoryRateLimitStore(), limit=1, algorithm="leaky")  # type: ignore[arg-type]
    assert caught.value.field == "algorithm"
    with pytest.raises(InvalidInput):
        RateLimiter(InMemoryRateLimitStore(), limit=1).check("")


class DownStore:
    def hit(self, key: str, request: Hit) -> Decision:
        raise Unavailable("redis down")

    def reset(self, key: str, **kwargs: object) -> None:
        raise Unavailable("redis down")


def test_store_down_fails_open_and_says_so() -> None:
    rl = RateLimiter(DownStore(), limit=1)  # type: ignore[arg-type]
    for _ in range(3):
        decision = rl.check("u")
        assert decision.allowed
        assert decision.degraded


def test_store_down_fails_closed_when_asked() -> None:
    rl = RateLimiter(DownStore(), limit=1, fail_open=False)  # type: ignore[arg-type]
    with pytest.raises(Unavailable):
        rl.check("u")


def test_reset_forgets_the_identity() -> None:
    rl, _ = limiter(1)
    rl.check("u")
    assert not rl.decide("u").allowed
    rl.reset("u")
    assert rl.decide("u").allowed


# --- the Redis adapter (Lua on fakeredis: no network) ---------------------------------------


def redis_store() -> tuple[RedisRateLimitStore, fakeredis.FakeRedis]:
    client = fakeredis.FakeRedis()
    return RedisRateLimitStore(client, prefix="t"), client


def assert_expires_in(
    client: fakeredis.FakeRedis, key: str | bytes, ttl_ms: int, since: int
) -> None:
    """The key's TTL was set to `ttl_ms` after `since` (a monotonic_ns reading): fakeredis counts
    a TTL down in real time, so the reading may be short by the wall time elapsed, never more."""
    remaining = client.pttl(key)
    elapsed_ms = (time.monotonic_ns() - since) // 1_000_000 + 1
    assert ttl_ms - elapsed_ms <= remaining <= ttl_ms


def test_redis_key_is_one_hash_tagged_slot_without_the_user_id() -> None:
    store, client = redis_store()
    rl = RateLimiter(store, limit=3, clock=FakeClock())
    started = time.monotonic_ns()
    rl.check("acme:alice{evil}", cost=2)
    rl.check("acme:alice{evil}", cost=1)
    keys = [k.decode() for k in client.keys("*")]
    assert keys == [hashed_key("t", "observations:acme:alice{evil}")]
    assert client.zcard(keys[0]) == 2
    key = keys[0]
    tag = key[key.index("{") + 1 : key.index("}")]
    assert len(tag) == 24
    assert all(c in "0123456789abcdef" for c in tag)
    assert "alice" not in key
    # the window and a second: it expires on its own
    assert_expires_in(client, key, 61_000, started)
    assert store.round_trips == 2  # one per check


def test_redis_fixed_window_key_expires_with_its_window() -> None:
    store, client = redis_store()
    clock = FakeClock(start_ms=60_000 * 1000 + 30_000)
    rl = RateLimiter(store, limit=3, algorithm="fixed", clock=clock)
    started = time.monotonic_ns()
    rl.check("u", cost=3)
    assert not rl.decide("u").allowed
    (key,) = client.keys("*")
    assert_expires_in(client, key, 31_000, started)  # the rest of the window and a second
    rl.reset("u")
    assert client.keys("*") == []
    assert rl.decide("u").allowed


def test_redis_connection_error_becomes_unavailable() -> None:
    server = fakeredis.FakeServer()
    server.connected = False
    store = RedisRateLimitStore(fakeredis.FakeRedis(server=server))
    with pytest.raises(Unavailable):
        store.hit("k", Hit(cost=1, limit=1, window_ms=1000, now_ms=0, algorithm="sliding"))
    degraded = RateLimiter(store, limit=1).check("u")
    assert degraded.degraded


steps = st.lists(
    st.tuples(st.integers(0, 30_000), st.integers(1, 8), st.sampled_from(["a", "b"])),
    min_size=1,
    max_size=40,
)


@settings(max_examples=60, deadline=None)
@given(steps=steps, limit=st.integers(1, 12), algorithm=st.sampled_from(["sliding", "fixed"]))
def test_redis_script_matches_the_in_memory_reference(
    steps: list[tuple[int, int, str]], limit: int, algorithm: Algorithm
) -> None:
    clock = FakeClock()
    memory = RateLimiter(
        InMemoryRateLimitStore(), limit=limit, window_s=10, algorithm=algorithm, clock=clock
    )
    store, _ = redis_store()
    on_redis = RateLimiter(store, limit=limit, window_s=10, algorithm=algorithm, clock=clock)
    for advance_ms, cost, who in steps:
        clock.advance(ms=advance_ms)
        assert on_redis.decide(who, cost) == memory.decide(who, cost)


def test_observation_limiter_follows_settings() -> None:
    rl = observation_limiter(Settings(observations_per_minute=7), fakeredis.FakeRedis())
    assert (rl.limit, rl.window_s, rl.algorithm) == (7, 60, "sliding")
    assert isinstance(rl.store, RedisRateLimitStore)
    assert isinstance(observation_limiter(Settings()).store, InMemoryRateLimitStore)
