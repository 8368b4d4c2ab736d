"""Faults: Redis stopped under the consumer and the session; PostgreSQL unreachable under the
session and memory writes."""

from __future__ import annotations

import time
from pathlib import Path
from typing import Any

from functions.ingest_consumer import handler as consumer_fn
from tests.integration.functions.conftest import peek_records, settings_for
from tests.support.services import RedisServer, RedisTarget, free_port

from engram.adapters.redis_client import make_redis
from engram.local.lambda_context import FakeLambdaContext

OBS = {
    "type": "tool_success",
    "content": "get_account ok",
    "metadata": {"toolName": "get_account", "durationMs": 12},
}


def dead_database_url() -> str:
    return f"postgresql://nobody:x@127.0.0.1:{free_port()}/engram?connect_timeout=1"


def test_consumer_reports_each_record_while_redis_is_down_and_stores_once_after(
    own_redis: RedisServer, migrated_url: str, tmp_path: Path, make: Any
) -> None:
    settings = settings_for(own_redis.target(), migrated_url, tmp_path)
    stack = make(settings, redis_client=make_redis(settings))
    body = {"observations": [{**OBS, "content": f"call {i}"} for i in range(5)]}
    accepted = stack.call("POST /v1/observations", body=body)
    assert accepted.status == 202

    own_redis.stop()
    records = peek_records(stack.ingest_queue)
    response = consumer_fn.handler({"Records": records}, FakeLambdaContext())
    failed = {f["itemIdentifier"] for f in response["batchItemFailures"]}
    assert failed == {r["messageId"] for r in records}
    assert len(records) == 1  # one message per request
    stack.deliver(rounds=3)  # redelivered and failing again: nothing is lost
    assert stack.ingest_queue.pending() == 1
    assert stack.ingest_queue.dead_letters == []

    own_redis.restart()
    assert stack.deliver() == 1
    assert stack.ingest_queue.pending() == 0
    # SQS delivers again (at least once): nothing new is added
    again = consumer_fn.handler({"Records": records}, FakeLambdaContext())
    assert again == {"batchItemFailures": []}
    stored = stack.container.behaviour.export("acme:alice")["observations"]
    assert sorted(o["id"] for o in stored) == sorted(accepted.body["ids"])


def test_a_bad_record_fails_alone(stack: Any) -> None:
    accepted = stack.call("POST /v1/observations", body={"observations": [OBS]})
    good = peek_records(stack.ingest_queue)[0]
    bad = {**good, "messageId": "poison", "body": "{not an observation"}
    response = consumer_fn.handler({"Records": [good, bad]}, FakeLambdaContext())
    assert response == {"batchItemFailures": [{"itemIdentifier": "poison"}]}
    stored = stack.container.behaviour.export("acme:alice")["observations"]
    assert [o["id"] for o in stored] == accepted.body["ids"]


def test_session_is_200_and_degraded_with_redis_stopped(
    own_redis: RedisServer, migrated_url: str, tmp_path: Path, make: Any
) -> None:
    settings = settings_for(own_redis.target(), migrated_url, tmp_path, consolidation_budget_ms=500)
    stack = make(settings, redis_client=make_redis(settings))
    saved = stack.call("POST /v1/memories", body={"key": "editor", "value": "helix"})
    assert saved.status == 201
    own_redis.stop()
    started = time.monotonic()
    res = stack.call("POST /v1/sessions", body={})
    assert time.monotonic() - started < 5  # budget + generous slack
    assert res.status == 200
    assert any(d.startswith("behaviour:") for d in res.body["degraded"])
    assert res.body["facts"] == []
    assert "helix" in res.body["sections"]["memories"]  # recall still answered
    assert res.body["prompt"] == res.body["sections"]["memories"]


def test_session_is_200_and_degraded_with_postgres_unreachable(
    redis_target: RedisTarget, tmp_path: Path, make: Any
) -> None:
    settings = settings_for(
        redis_target, dead_database_url(), tmp_path, consolidation_budget_ms=500
    )
    stack = make(settings)
    stack.call("POST /v1/events", body={"events": [{"kind": "query", "text": "royalty report"}]})
    stack.deliver()
    started = time.monotonic()
    res = stack.call("POST /v1/sessions", body={"query": "editor"})
    assert time.monotonic() - started < 5
    assert res.status == 200
    assert any(d.startswith("memories:") for d in res.body["degraded"])
    assert [f["subject"] for f in res.body["facts"]] == ["domain_preference:royalty"]
    assert res.body["memories"] == []


def test_memory_writes_are_503_with_postgres_unreachable(
    redis_target: RedisTarget, tmp_path: Path, make: Any
) -> None:
    settings = settings_for(redis_target, dead_database_url(), tmp_path)
    stack = make(settings)
    res = stack.call("POST /v1/memories", body={"key": "editor", "value": "helix"})
    assert res.status == 503
    assert res.body["error"]["code"] == "unavailable"
    health = stack.call("GET /v1/health", user=None)
    assert health.status == 200
    assert (health.body["redis"], health.body["postgres"]) == ("ok", "down")
    assert health.body["status"] == "degraded"


def test_health_is_public_and_ok(stack: Any) -> None:
    res = stack.call("GET /v1/health", user=None)
    assert res.status == 200
    assert res.body["status"] == "ok"
    assert (res.body["redis"], res.body["postgres"]) == ("ok", "ok")


def test_erasure_with_postgres_unreachable_is_503_and_erases_nothing(
    redis_target: RedisTarget, tmp_path: Path, make: Any
) -> None:
    settings = settings_for(redis_target, dead_database_url(), tmp_path)
    stack = make(settings)
    stack.call("POST /v1/events", body={"events": [{"kind": "query", "text": "royalty report"}]})
    stack.deliver()
    res = stack.call("DELETE /v1/me")
    assert res.status == 503
    assert len(stack.container.behaviour.export("acme:alice")["observations"]) == 1


def test_transcript_is_503_when_the_extraction_queue_refuses(stack: Any) -> None:
    stack.extraction_queue.fail_sends = lambda entry: True
    res = stack.call(
        "POST /v1/conversations/{conversationId}/transcript",
        body={"messages": [{"role": "user", "content": "hi"}]},
        path={"conversationId": "c1"},
    )
    assert res.status == 503
    assert stack.extraction_queue.pending() == 0


def test_over_the_rate_limit_is_429_and_queues_nothing(
    redis_target: RedisTarget, migrated_url: str, tmp_path: Path, make: Any
) -> None:
    settings = settings_for(redis_target, migrated_url, tmp_path, observations_per_minute=5)
    stack = make(settings)
    body = {"observations": [{**OBS, "content": f"call {i}"} for i in range(4)]}
    assert stack.call("POST /v1/observations", body=body).status == 202
    refused = stack.call("POST /v1/observations", body=body)
    assert refused.status == 429
    assert refused.body["error"]["code"] == "rate_limited"
    assert int(refused.headers["Retry-After"]) >= 1
    assert stack.ingest_queue.pending() == 1  # the first request's one message
    other = stack.call("POST /v1/observations", body=body, user="bob")
    assert other.status == 202  # limits are per identity


def test_ingest_accepts_with_redis_down(
    own_redis: RedisServer, migrated_url: str, tmp_path: Path, make: Any
) -> None:
    settings = settings_for(own_redis.target(), migrated_url, tmp_path)
    stack = make(settings, redis_client=make_redis(settings))
    own_redis.stop()
    res = stack.call("POST /v1/observations", body={"observations": [OBS]})
    assert res.status == 202  # the rate limiter fails open; SQS is what must accept
    assert stack.ingest_queue.pending() == 1
