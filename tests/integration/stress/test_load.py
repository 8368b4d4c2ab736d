"""Load with reconciliation: 8 concurrent clients against the local service (loopback), then
every observation that got a 202 is in Redis exactly once (consolidated or pending) and every
memory write that got a 2xx is in PostgreSQL. Bounded: a few hundred requests."""

from __future__ import annotations

import json

from tests.integration.stress.conftest import Live
from tests.integration.stress.loadgen import reconcile, run_load


def test_concurrent_clients_reconcile_exactly(live: Live, migrated_url: str) -> None:
    load = run_load(live.url, live.token, clients=8, iterations=20)
    summary = load.summary()
    print("load:", json.dumps(summary))
    assert summary["errorCount"] == 0, summary["errors"]
    # each request: a query naming two domains (revenue, royalty) and a tool call
    assert summary["observationsAccepted"] == 8 * 20 * 3
    assert live.queue.drain(30)
    assert live.queue.dead_letters == []
    redis_client = live.redis()
    counts = reconcile(load, redis_client, migrated_url, live.settings.redis_key_prefix)
    assert counts["consolidated"] + counts["pending"] == summary["observationsAccepted"]
    assert counts["consolidated"] > 0  # sessions ran during the load
    assert counts["memories"] == summary["memoriesWritten"] == 8 * 5

    # racing sessions of one identity reinforced each fact at most once per round: one more
    # session after the load consolidates what is pending, and a second one changes nothing
    http = live.user("user0", "loadteam")
    first = http.post("/v1/sessions", json={}).json()
    second = http.post("/v1/sessions", json={}).json()
    assert first["degraded"] == second["degraded"] == []
    counts_first = {f["subject"]: f["reinforcementCount"] for f in first["facts"]}
    counts_second = {f["subject"]: f["reinforcementCount"] for f in second["facts"]}
    assert counts_first == counts_second
    book = live.ledger("loadteam:user0")
    assert book.cursor == book.seq
