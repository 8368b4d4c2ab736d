"""Retries are not repeats, through the handlers on a real redis-server with a fake clock.

Ingest -> SQS stand-in -> consumer -> Redis, then ``POST /v1/sessions`` consolidates. Every
test ends by reading the behavioural store straight from Redis: what is stored is exactly
what was accepted, once.
"""

from __future__ import annotations

from collections.abc import Iterator
from typing import Any

import pytest
import redis
from tests.integration.functions.conftest import Stack, installed, make_stack, settings_for
from tests.support.ledger import assert_exactly_once, ledger
from tests.support.services import RedisTarget, free_port

from engram.adapters.idempotency_keys import RedisIdempotencyKeys
from engram.clock import MS_PER_DAY, FakeClock
from engram.errors import Unavailable

IDENTITY = "acme:alice"
ROYALTIES = {"events": [{"kind": "query", "text": "show my royalties"}]}
CONTRACTS = {"events": [{"kind": "query", "text": "and my contracts"}]}
MINUTE = 60_000
HOUR = 60 * MINUTE


@pytest.fixture
def clock() -> FakeClock:
    """The stack's clock (overrides the conftest fixture)."""
    return FakeClock()  # 2026-01-01T00:00:00Z: on a window and a day boundary


@pytest.fixture
def raw_redis(redis_target: RedisTarget) -> Iterator[redis.Redis]:
    """The stack's Redis as Engram's user (standalone or cluster)."""
    client: redis.Redis = redis_target.client()
    yield client
    client.close()


def post(stack: Stack, body: dict[str, Any], key: str | None = None) -> list[str]:
    headers = {"Idempotency-Key": key} if key else {}
    res = stack.call("POST /v1/events", body=body, headers=headers)
    assert res.status == 202, res.body
    ids: list[str] = res.body["ids"]
    return ids


def reinforcements(stack: Stack, subject: str) -> int:
    """Deliver what is queued, start a session (consolidation) and read the fact's count."""
    stack.deliver()
    res = stack.call("POST /v1/sessions", body={})
    assert res.status == 200, res.body
    counts = {f["subject"]: f["reinforcementCount"] for f in res.body["facts"]}
    return counts.get(subject, 0)


def assert_stored_once(client: redis.Redis, accepted: list[str]) -> None:
    assert_exactly_once(ledger(client, IDENTITY), accepted)


@pytest.mark.parametrize("keys", [(None, None), ("turn-1", "turn-2")], ids=["keyless", "keyed"])
def test_the_same_body_in_two_sessions_an_hour_apart_reinforces_twice(
    stack: Stack, clock: FakeClock, raw_redis: redis.Redis, keys: tuple[str | None, ...]
) -> None:
    first = post(stack, ROYALTIES, keys[0])
    assert reinforcements(stack, "domain_preference:royalty") == 1
    clock.advance(ms=HOUR)
    second = post(stack, ROYALTIES, keys[1])
    assert set(second).isdisjoint(first)  # a repeat: new observations
    assert reinforcements(stack, "domain_preference:royalty") == 2
    assert_stored_once(raw_redis, first + second)


def test_the_same_body_twice_within_the_window_is_stored_once(
    stack: Stack, clock: FakeClock, raw_redis: redis.Redis
) -> None:
    clock.advance(ms=MINUTE)
    first = post(stack, ROYALTIES)
    clock.advance(ms=5 * MINUTE)  # still inside the 10-minute window of the first
    assert post(stack, ROYALTIES) == first
    assert reinforcements(stack, "domain_preference:royalty") == 1
    assert_stored_once(raw_redis, first)


def test_a_retry_across_a_window_boundary_is_stored_twice_but_reinforces_once(
    stack: Stack, clock: FakeClock, raw_redis: redis.Redis
) -> None:
    clock.advance(ms=10 * MINUTE - 1000)
    first = post(stack, ROYALTIES)
    clock.advance(ms=2000)  # the retry lands in the next window: new ids
    second = post(stack, ROYALTIES)
    assert set(second).isdisjoint(first)
    # both copies are consolidated in one round: one reinforcement, as for one request
    assert reinforcements(stack, "domain_preference:royalty") == 1
    assert_stored_once(raw_redis, first + second)


def test_the_same_key_twice_is_stored_once_past_the_window_and_midnight(
    stack: Stack, clock: FakeClock, raw_redis: redis.Redis
) -> None:
    clock.advance(ms=MS_PER_DAY - 30 * MINUTE)  # 23:30 UTC
    first = post(stack, ROYALTIES, "req-7")
    clock.advance(ms=HOUR)  # 00:30 the next day, long past the keyless window
    assert post(stack, ROYALTIES, "req-7") == first
    assert reinforcements(stack, "domain_preference:royalty") == 1
    assert_stored_once(raw_redis, first)


def test_the_same_key_with_another_body_is_422_and_stores_nothing(
    stack: Stack, clock: FakeClock, raw_redis: redis.Redis
) -> None:
    first = post(stack, ROYALTIES, "req-8")
    clock.advance(ms=MINUTE)
    queued = stack.ingest_queue.pending()
    res = stack.call("POST /v1/events", body=CONTRACTS, headers={"Idempotency-Key": "req-8"})
    assert res.status == 422
    assert res.body["error"]["code"] == "idempotency_key_reused"
    assert [d["field"] for d in res.body["error"]["details"]] == ["Idempotency-Key"]
    assert stack.ingest_queue.pending() == queued  # nothing of it was queued
    assert reinforcements(stack, "domain_preference:contract") == 0
    assert_stored_once(raw_redis, first)


def test_after_24_hours_the_key_is_free_again(
    stack: Stack, clock: FakeClock, raw_redis: redis.Redis
) -> None:
    clock.advance(ms=12 * HOUR)
    first = post(stack, ROYALTIES, "req-9")
    clock.advance(ms=MS_PER_DAY - MINUTE)  # a minute before the key is free: still refused
    res = stack.call("POST /v1/events", body=CONTRACTS, headers={"Idempotency-Key": "req-9"})
    assert res.status == 422
    clock.advance(ms=MINUTE)  # 24 hours after its first use
    other = post(stack, CONTRACTS, "req-9")
    clock.advance(ms=MS_PER_DAY)
    again = post(stack, CONTRACTS, "req-9")  # another 24 hours: a new request again
    assert len({*first, *other, *again}) == len(first) + len(other) + len(again)
    assert reinforcements(stack, "domain_preference:contract") == 1  # one round, one step
    assert_stored_once(raw_redis, first + other + again)


def test_a_key_claim_names_no_user_and_no_body_and_expires(
    stack: Stack, raw_redis: redis.Redis, redis_target: RedisTarget
) -> None:
    first = post(stack, ROYALTIES, "req-10")
    claims = redis_target.key_names("engram:idem:*")  # listed by the administrator
    assert len(claims) == 1
    value = raw_redis.get(claims[0]) or b""
    for secret in (b"alice", b"acme", b"req-10", b"royalt"):
        assert secret not in claims[0]
        assert secret not in value
    assert 0 < raw_redis.pttl(claims[0]) <= MS_PER_DAY
    stack.deliver()
    assert_stored_once(raw_redis, first)


def test_an_unreachable_key_store_is_unavailable_to_the_use_case() -> None:
    client = redis.Redis(host="127.0.0.1", port=free_port(), socket_connect_timeout=0.5)
    with pytest.raises(Unavailable):
        RedisIdempotencyKeys(client).claim("s", "a" * 64, now_ms=0, ttl_ms=1)


@pytest.fixture
def keys_down_stack(
    redis_target: RedisTarget, migrated_url: str, tmp_path: Any, clock: FakeClock
) -> Iterator[Stack]:
    """A stack whose Idempotency-Key store is down (nothing listens on its port) while the
    behavioural store and the queue are up."""
    dead = redis.Redis(host="127.0.0.1", port=free_port(), socket_connect_timeout=0.2)
    settings = settings_for(redis_target, migrated_url, tmp_path)
    built = make_stack(settings, clock=clock, parts={"ingest_keys": RedisIdempotencyKeys(dead)})
    try:
        with installed(built):
            yield built
    finally:
        dead.close()


@pytest.mark.parametrize("route", ["/v1/observations", "/v1/events"])
def test_two_bodies_under_one_key_are_both_stored_while_the_key_store_is_down(
    keys_down_stack: Stack, clock: FakeClock, raw_redis: redis.Redis, route: str
) -> None:
    """Fail open never merges: bodies of one shape under one key keep apart, a retry does not."""

    def body(text: str) -> dict[str, Any]:
        if route == "/v1/events":
            return {"events": [{"kind": "query", "text": text}]}
        meta = {"toolName": "search", "durationMs": 5}
        return {"observations": [{"type": "tool_success", "content": text, "metadata": meta}]}

    def send(text: str) -> list[str]:
        res = keys_down_stack.call(
            f"POST {route}", body=body(text), headers={"Idempotency-Key": "k"}
        )
        assert res.status == 202, res.body
        ids: list[str] = res.body["ids"]
        return ids

    first = send("show my royalties")
    clock.advance(ms=MINUTE)
    other = send("royalties for march")
    assert set(other).isdisjoint(first)
    assert send("show my royalties") == first  # the retry: the same ids, stored once
    keys_down_stack.deliver()
    assert_stored_once(raw_redis, first + other)
