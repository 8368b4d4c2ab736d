"""The ingest consumer on a real redis-server (standalone and cluster): an SQS batch grouped by
identity (one round trip each), one identity's writes failing alone, redeliveries, both
message shapes, and a request split into chunks past the queue's message limit."""

from __future__ import annotations

import json
import time
from pathlib import Path
from typing import Any

from functions.ingest_consumer import handler as consumer_fn
from tests.integration.functions.conftest import Stack, peek_records, settings_for
from tests.support.services import RedisTarget

from engram.behaviour.models import Observation
from engram.local.lambda_context import FakeLambdaContext


def obs(i: int, content: str = "") -> dict[str, Any]:
    return {
        "type": "tool_success",
        "content": content or f"call {i}",
        "metadata": {"toolName": f"tool_{i % 5}", "durationMs": i},
    }


def post(stack: Stack, user: str, n: int, content: str = "") -> list[str]:
    res = stack.call(
        "POST /v1/observations",
        body={"observations": [obs(i, content) for i in range(n)]},
        user=user,
        headers={"Idempotency-Key": f"{user}-{time.time_ns()}"},
    )
    assert res.status == 202, res.body
    ids: list[str] = res.body["ids"]
    return ids


def stored(stack: Stack, user: str) -> list[str]:
    data = stack.container.behaviour.export(f"acme:{user}")
    return sorted(o["id"] for o in data["observations"])


def consume(records: list[dict[str, Any]]) -> set[str]:
    response = consumer_fn.handler({"Records": records}, FakeLambdaContext())
    return {f["itemIdentifier"] for f in response["batchItemFailures"]}


def test_mixed_identities_in_one_batch_cost_one_round_trip_each(stack: Stack) -> None:
    post(stack, "dave", 1)
    assert consume(peek_records(stack.ingest_queue)) == set()  # warm: the scripts are loaded
    stack.deliver()
    sent: dict[str, list[str]] = {}
    for user in ("alice", "bob", "alice", "carol", "bob", "alice"):
        sent.setdefault(user, []).extend(post(stack, user, 10))
    records = peek_records(stack.ingest_queue)
    assert len(records) == 6  # one message per request
    store = stack.container.behaviour_store
    before = store.round_trips
    assert consume(records) == set()
    assert store.round_trips - before <= 3  # alice, bob, carol
    for user, ids in sent.items():
        assert stored(stack, user) == sorted(ids)


def test_one_identity_failing_in_redis_reports_only_its_messages(
    stack: Stack, redis_target: RedisTarget
) -> None:
    alice = post(stack, "alice", 5) + post(stack, "alice", 5)
    bob = post(stack, "bob", 5)
    records = peek_records(stack.ingest_queue)
    store = stack.container.behaviour_store
    admin = redis_target.admin()
    blocked = store.keys("acme:alice").state  # her state hash (the first write), made a string
    admin.set(blocked, "not a sorted set")
    try:
        failed = consume(records)
    finally:
        admin.delete(blocked)
    alice_messages = {r["messageId"] for r in records if "acme:alice" in r["body"]}
    assert len(alice_messages) == 2
    assert failed == alice_messages  # only alice's come back
    assert stored(stack, "bob") == sorted(bob)
    assert stored(stack, "alice") == []
    # redelivered after the fault: alice's are stored, bob's add nothing
    assert consume(records) == set()
    assert stored(stack, "alice") == sorted(alice)
    assert stored(stack, "bob") == sorted(bob)


def test_a_redelivered_batch_adds_nothing(stack: Stack) -> None:
    ids = post(stack, "alice", 50)
    records = peek_records(stack.ingest_queue)
    assert consume(records) == set()
    assert consume(records) == set()
    assert consume(records + records) == set()  # one message twice in a batch
    assert stored(stack, "alice") == sorted(ids)


def test_old_and_new_shapes_in_one_batch(stack: Stack) -> None:
    ids = post(stack, "alice", 3)
    new = peek_records(stack.ingest_queue)[0]
    now = int(time.time() * 1000)
    old = [
        {
            **new,
            "messageId": f"old-{user}",
            "body": Observation.model_validate(
                {**obs(7), "id": f"old-{user}", "identityId": f"acme:{user}", "createdAt": now}
            ).model_dump_json(by_alias=True, exclude_none=True),
        }
        for user in ("alice", "bob")
    ]
    assert "v" not in json.loads(old[0]["body"])  # the shape sent before
    assert consume([old[0], new, old[1]]) == set()
    assert stored(stack, "alice") == sorted([*ids, "old-alice"])
    assert stored(stack, "bob") == ["old-bob"]


def test_a_request_past_the_message_limit_is_chunks_stored_exactly_once(
    redis_target: RedisTarget, migrated_url: str, tmp_path: Path, make: Any
) -> None:
    limit = 16 * 1024
    settings = settings_for(redis_target, migrated_url, tmp_path, ingest_max_message_bytes=limit)
    stack = make(settings)
    calls: list[int] = []
    send = stack.ingest_queue.send_message_batch

    def counted(Entries: Any) -> dict[str, Any]:  # noqa: N803
        calls.append(len(Entries))
        return send(Entries)

    stack.ingest_queue.send_message_batch = counted  # type: ignore[method-assign]
    ids = post(stack, "alice", 100, content="é" * 400)  # ~90 KiB of observations
    records = peek_records(stack.ingest_queue)
    assert len(records) >= 4
    assert all(len(r["body"].encode()) <= limit for r in records)
    assert sum(calls) == len(records)  # batches of at most the limit: one chunk each here
    carried = [o["id"] for r in records for o in json.loads(r["body"])["observations"]]
    assert sorted(carried) == sorted(ids)  # each id once: no loss, no duplicate
    # each chunk consumed on its own, last first; then all of them again (a redelivery)
    for record in reversed(records):
        assert consume([record]) == set()
    assert consume(records) == set()
    assert stored(stack, "alice") == sorted(ids)
