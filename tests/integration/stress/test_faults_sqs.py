"""Duplicate and out-of-order deliveries from the SQS stand-in, through the running service:
every observation is stored exactly once, late ones are still counted, and each session
reinforces a fact at most once."""

from __future__ import annotations

from typing import Any

from tests.integration.stress.conftest import Live, assert_exactly_once

IDENTITY = "acme:alice"


def observations(n: int, *, tool: str, start: int = 0, created_at: int | None = None) -> Any:
    items = []
    for i in range(start, start + n):
        item: dict[str, Any] = {
            "type": "tool_success",
            "content": f"{tool} call {i}",
            "metadata": {"toolName": tool, "durationMs": i},
        }
        if created_at is not None:
            item["createdAt"] = created_at
        items.append(item)
    return {"observations": items}


def fact(body: dict[str, Any], subject: str) -> dict[str, Any]:
    found = [f for f in body["facts"] if f["subject"] == subject]
    assert len(found) == 1, body["facts"]
    one: dict[str, Any] = found[0]
    return one


def test_duplicated_and_shuffled_deliveries_store_each_observation_once(live: Live) -> None:
    http = live.user()
    live.queue.out_of_order = True
    accepted: list[str] = []
    for batch in range(5):
        live.queue.duplicate_next(1)  # the request's one message is delivered twice
        res = http.post(
            "/v1/observations", json=observations(20, tool="get_account", start=batch * 20)
        )
        assert res.status_code == 202
        accepted += res.json()["ids"]
    assert live.queue.drain(30)
    assert live.queue.dead_letters == []
    assert live.queue.stats.delivered >= 10  # the duplicates really were delivered
    book = live.ledger(IDENTITY)
    assert_exactly_once(book, accepted)
    assert book.seq == 100  # a duplicate never even took an arrival number

    body = live.user().post("/v1/sessions", json={}).json()
    affinity = fact(body, "tool_affinity:get_account")
    assert affinity["reinforcementCount"] == 1  # one round, one reinforcement
    assert live.ledger(IDENTITY).cursor == 100


def test_late_out_of_order_observations_are_counted_in_the_next_round(live: Live) -> None:
    http = live.user()
    first = http.post("/v1/observations", json=observations(3, tool="search"))
    assert first.status_code == 202
    assert live.queue.drain(10)
    body = http.post("/v1/sessions", json={}).json()
    assert fact(body, "tool_affinity:search")["reinforcementCount"] == 1
    checkpoint_ms = max(f["lastReinforcedAt"] for f in body["facts"])

    # observations made long before the checkpoint reach Redis only now, shuffled, twice
    live.queue.out_of_order = True
    live.queue.duplicate_next(1)  # the request's one message, twice
    late = http.post(
        "/v1/observations",
        json=observations(6, tool="search", start=3, created_at=checkpoint_ms - 3_600_000),
    )
    assert late.status_code == 202
    assert live.queue.drain(10)
    assert_exactly_once(live.ledger(IDENTITY), first.json()["ids"] + late.json()["ids"])

    body = http.post("/v1/sessions", json={}).json()
    assert fact(body, "tool_affinity:search")["reinforcementCount"] == 2  # not skipped
    again = http.post("/v1/sessions", json={}).json()
    assert fact(again, "tool_affinity:search")["reinforcementCount"] == 2  # not re-counted
    book = live.ledger(IDENTITY)
    assert book.cursor == book.seq == 9
