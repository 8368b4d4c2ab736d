"""Redis behind a fault proxy under the running local service: slow, down, flapping, back.

Contract: sessions always answer 200 within the consolidation budget plus slack, saying why
they are degraded; ingest keeps answering 202 (SQS, not Redis, is its durability); once Redis
is back every observation that got a 202 is stored exactly once and consolidated at the next
session.
"""

from __future__ import annotations

import time
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from typing import Any

import httpx
from tests.integration.stress.conftest import Live, assert_exactly_once, eventually
from tests.support.faultproxy import FaultProxy

BUDGET_MS = 500
SLACK_S = 1.5  # generous: a 2-core machine shared with other suites
IDENTITY = "acme:alice"


def events(i: int) -> dict[str, Any]:
    return {
        "events": [
            {"kind": "query", "text": f"revenue report {i}"},
            {"kind": "tool", "toolName": "get_account", "ok": True, "durationMs": 10 + i},
        ]
    }


def send(http: httpx.Client, i: int) -> list[str]:
    res = http.post("/v1/events", json=events(i), headers={"Idempotency-Key": f"req-{i}"})
    assert res.status_code == 202, res.text
    ids: list[str] = res.json()["ids"]
    return ids


def timed_session(http: httpx.Client) -> tuple[float, dict[str, Any]]:
    started = time.monotonic()
    res = http.post("/v1/sessions", json={})
    elapsed = time.monotonic() - started
    assert res.status_code == 200, res.text
    body: dict[str, Any] = res.json()
    return elapsed, body


def session_in_budget(http: httpx.Client) -> dict[str, Any]:
    """A session start: 200 within the consolidation budget plus slack, whatever Redis does."""
    elapsed, body = timed_session(http)
    assert elapsed < BUDGET_MS / 1000 + SLACK_S
    return body


@contextmanager
def behind_proxy(
    own_redis: Any, migrated_url: str, live_factory: Callable[..., Live]
) -> Iterator[tuple[FaultProxy, Live]]:
    """The local service on ``own_redis`` reached through a fault proxy."""
    with FaultProxy.for_redis_url(own_redis.url) as proxy:
        target = own_redis.target().reached_at(proxy.url_for_redis())
        yield proxy, live_factory(target, migrated_url, consolidation_budget_ms=BUDGET_MS)


def recovered_and_consolidated(live: Live, http: httpx.Client, accepted: list[str]) -> None:
    """Queue drained with nothing dead-lettered, every 202'd id stored once, and a healthy
    session consolidates all of them."""
    assert live.queue.drain(30), "the ingest queue did not drain after recovery"
    assert live.queue.dead_letters == []
    assert_exactly_once(live.ledger(IDENTITY), accepted)
    _, body = timed_session(http)
    assert body["degraded"] == []
    subjects = {f["subject"] for f in body["facts"]}
    assert {"domain_preference:revenue", "tool_affinity:get_account"} <= subjects
    book = live.ledger(IDENTITY)
    assert all(book.consolidated(i) for i in accepted)
    assert book.cursor == book.seq


def test_slow_redis_degrades_sessions_within_budget_and_loses_nothing(
    own_redis: Any, migrated_url: str, live_factory: Callable[..., Live]
) -> None:
    with behind_proxy(own_redis, migrated_url, live_factory) as (proxy, live):
        http = live.user()
        accepted = send(http, 0)
        assert live.queue.drain(10)

        proxy.latency(400)  # >= 800 ms per round trip, over the 500 ms budget
        accepted += send(http, 1)  # ingest does not wait for Redis
        for _ in range(2):
            body = session_in_budget(http)
            assert body["degraded"] == ["behaviour:timeout"]
            assert body["facts"] == []
            assert body["sections"]["facts"] == ""
            assert body["toolAffinities"] == {}

        proxy.pass_through()
        recovered_and_consolidated(live, http, accepted)


def test_redis_down_then_back(
    own_redis: Any, migrated_url: str, live_factory: Callable[..., Live]
) -> None:
    with behind_proxy(own_redis, migrated_url, live_factory) as (proxy, live):
        http = live.user()
        anonymous = live.http()
        accepted = send(http, 0)
        assert live.queue.drain(10)

        proxy.down()
        accepted += send(http, 1)
        accepted += send(http, 2)
        body = session_in_budget(http)
        assert body["degraded"] == ["behaviour:unavailable"]
        assert body["facts"] == []
        health = anonymous.get("/v1/health").json()
        assert (health["status"], health["redis"], health["postgres"]) == (
            "degraded",
            "down",
            "ok",
        )
        facts = http.get("/v1/facts")
        assert facts.status_code == 503
        assert facts.headers["Retry-After"] == "1"
        assert facts.json()["error"]["code"] == "unavailable"

        proxy.pass_through()
        eventually(lambda: anonymous.get("/v1/health").json()["redis"] == "ok")
        recovered_and_consolidated(live, http, accepted)


def test_flapping_redis_loses_and_duplicates_nothing(
    own_redis: Any, migrated_url: str, live_factory: Callable[..., Live]
) -> None:
    with behind_proxy(own_redis, migrated_url, live_factory) as (proxy, live):
        http = live.user()
        accepted: list[str] = []
        proxy.flap(0.25)
        reasons: set[str] = set()
        for i in range(12):
            accepted += send(http, i)
            body = session_in_budget(http)
            reasons.update(body["degraded"])
            time.sleep(0.05)
        assert proxy.stats().transitions >= 2
        # some sessions met Redis down (each answered 200 and said so), and no other reason
        assert reasons
        assert reasons <= {"behaviour:unavailable", "behaviour:timeout"}

        proxy.pass_through()
        recovered_and_consolidated(live, http, accepted)
        # a replay of every request (client retries with the same Idempotency-Key) adds nothing
        again: list[str] = []
        for i in range(12):
            again += send(http, i)
        assert again == accepted
        assert live.queue.drain(10)
        assert_exactly_once(live.ledger(IDENTITY), accepted)


def test_blackholed_redis_does_not_block_ingest_or_sessions(
    own_redis: Any, migrated_url: str, live_factory: Callable[..., Live]
) -> None:
    """Redis accepts connections and never answers: the rate limiter fails open after its
    socket timeout (ingest needs SQS, not Redis), sessions degrade within the budget, and the
    observations queued meanwhile are stored once Redis answers again."""
    with behind_proxy(own_redis, migrated_url, live_factory) as (proxy, live):
        http = live.user()
        accepted = send(http, 0)
        assert live.queue.drain(10)
        proxy.blackhole()
        started = time.monotonic()
        accepted += send(http, 1)
        assert time.monotonic() - started < 5  # socket timeouts, not a hang
        body = session_in_budget(http)
        assert body["degraded"] in (["behaviour:timeout"], ["behaviour:unavailable"])
        proxy.pass_through()
        recovered_and_consolidated(live, http, accepted)
