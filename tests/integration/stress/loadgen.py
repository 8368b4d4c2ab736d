"""A bounded load generator for the local service, with reconciliation.

``run_load(url, token_for, clients=8, iterations=M)`` starts ``clients`` threads (loopback
only; two clients share each identity, so sessions of one identity race). Each iteration posts
events (``Idempotency-Key`` unique per request), and every few iterations starts a session or
saves a memory. It records every observation id that got a 202 and every memory write that got
a 2xx, and counts outcomes by status. ``reconcile`` then checks those records against Redis and
PostgreSQL. Used by ``tests/integration/stress/test_load.py`` and ``bench/bench_ingest.py``.
"""

from __future__ import annotations

import statistics
import threading
import time
from collections import Counter
from collections.abc import Callable
from dataclasses import dataclass, field
from typing import Any
from urllib.parse import urlsplit

import httpx

TEAM = "loadteam"


@dataclass
class ClientResult:
    identity: str
    accepted_ids: list[str] = field(default_factory=list)
    memories: dict[str, str] = field(default_factory=dict)
    statuses: Counter[str] = field(default_factory=Counter)
    latencies_ms: dict[str, list[float]] = field(default_factory=dict)
    errors: list[str] = field(default_factory=list)

    def timed(self, kind: str, started: float) -> None:
        self.latencies_ms.setdefault(kind, []).append((time.perf_counter() - started) * 1000)


@dataclass
class LoadResult:
    clients: int
    iterations: int
    seconds: float
    results: list[ClientResult]

    @property
    def accepted_by_identity(self) -> dict[str, list[str]]:
        out: dict[str, list[str]] = {}
        for r in self.results:
            out.setdefault(r.identity, []).extend(r.accepted_ids)
        return out

    @property
    def statuses(self) -> Counter[str]:
        total: Counter[str] = Counter()
        for r in self.results:
            total.update(r.statuses)
        return total

    @property
    def requests(self) -> int:
        return sum(self.statuses.values())

    def summary(self) -> dict[str, Any]:
        observations = sum(len(r.accepted_ids) for r in self.results)
        latencies: dict[str, list[float]] = {}
        for r in self.results:
            for kind, values in r.latencies_ms.items():
                latencies.setdefault(kind, []).extend(values)
        errors = {k: v for k, v in self.statuses.items() if not k.split()[-1].startswith("2")}
        return {
            "clients": self.clients,
            "iterations": self.iterations,
            "seconds": round(self.seconds, 2),
            "requests": self.requests,
            "requestsPerSecond": round(self.requests / self.seconds, 1),
            "observationsAccepted": observations,
            "observationsPerSecond": round(observations / self.seconds, 1),
            "memoriesWritten": sum(len(r.memories) for r in self.results),
            "statuses": dict(sorted(self.statuses.items())),
            "errorCount": sum(errors.values()),
            "errors": dict(sorted(errors.items())),
            "latencyMs": {kind: _stats(values) for kind, values in sorted(latencies.items())},
        }


def _stats(values: list[float]) -> dict[str, float]:
    ordered = sorted(values)
    p99 = ordered[min(len(ordered) - 1, int(len(ordered) * 0.99))]
    return {
        "n": len(ordered),
        "p50": round(statistics.median(ordered), 2),
        "p99": round(p99, 2),
        "max": round(ordered[-1], 2),
    }


def _client(
    url: str,
    token: str,
    result: ClientResult,
    index: int,
    iterations: int,
    barrier: threading.Barrier,
) -> None:
    headers = {"Authorization": f"Bearer {token}"}
    with httpx.Client(base_url=url, headers=headers, timeout=30) as http:
        barrier.wait(30)
        for i in range(iterations):
            try:
                body = {
                    "events": [
                        {"kind": "query", "text": f"revenue and royalty question {index}.{i}"},
                        {
                            "kind": "tool",
                            "toolName": f"tool{i % 4}",
                            "ok": i % 5 != 0,
                            "durationMs": 10 + i,
                        },
                    ]
                }
                started = time.perf_counter()
                res = http.post(
                    "/v1/events", json=body, headers={"Idempotency-Key": f"c{index}-r{i}"}
                )
                result.timed("events", started)
                result.statuses[f"events {res.status_code}"] += 1
                if res.status_code == 202:
                    result.accepted_ids.extend(res.json()["ids"])
                if i % 3 == 1:
                    started = time.perf_counter()
                    res = http.post("/v1/sessions", json={"query": "editor"})
                    result.timed("sessions", started)
                    result.statuses[f"sessions {res.status_code}"] += 1
                if i % 4 == 2:
                    key, value = f"c{index}-k{i}", f"value {index}.{i}"
                    started = time.perf_counter()
                    res = http.post("/v1/memories", json={"key": key, "value": value})
                    result.timed("memories", started)
                    result.statuses[f"memories {res.status_code}"] += 1
                    if res.status_code in (200, 201):
                        result.memories[key] = value
            except httpx.HTTPError as exc:
                result.statuses[f"transport {type(exc).__name__}"] += 1
                result.errors.append(repr(exc))


def run_load(
    url: str,
    token_for: Callable[[str, str], str],
    *,
    clients: int = 8,
    iterations: int = 25,
    team: str = TEAM,
) -> LoadResult:
    host = urlsplit(url).hostname or ""
    if host not in ("127.0.0.1", "localhost", "::1"):
        raise ValueError(f"url: load runs against loopback only, not {host!r}")
    users = [f"user{i // 2}" for i in range(clients)]  # two clients per identity
    results = [ClientResult(identity=f"{team}:{u}") for u in users]
    barrier = threading.Barrier(clients)
    threads = [
        threading.Thread(
            target=_client,
            args=(url, token_for(users[i], team), results[i], i, iterations, barrier),
            daemon=True,
        )
        for i in range(clients)
    ]
    started = time.perf_counter()
    for t in threads:
        t.start()
    for t in threads:
        t.join(300)
    return LoadResult(clients, iterations, time.perf_counter() - started, results)


def reconcile(
    load: LoadResult, redis_client: Any, database_url: str, prefix: str
) -> dict[str, int]:
    """Check every 202 and every 2xx memory write against the stores; raises AssertionError.

    Returns counts: observations consolidated / pending, memories found."""
    import psycopg
    from tests.integration.stress.conftest import assert_exactly_once, ledger

    consolidated = pending = 0
    for identity, accepted in load.accepted_by_identity.items():
        book = ledger(redis_client, identity, prefix)
        assert_exactly_once(book, accepted)
        consolidated += sum(1 for i in accepted if book.consolidated(i))
        pending += sum(1 for i in accepted if book.pending(i))
    written = {
        (r.identity.split(":", 1)[1], k): v for r in load.results for k, v in r.memories.items()
    }
    with psycopg.connect(database_url, autocommit=True) as conn:
        rows = conn.execute(
            "SELECT owner_id, key, value, count(*) OVER (PARTITION BY owner_id, key)"
            " FROM memories WHERE team_id = %s AND scope = 'user'",
            (TEAM,),
        ).fetchall()
    stored = {(owner, key): value for owner, key, value, _ in rows}
    assert all(n == 1 for *_, n in rows), "a memory key is stored twice"
    missing = {k for k in written if k not in stored}
    assert not missing, f"memory writes that got a 2xx are missing: {sorted(missing)[:5]}"
    assert all(stored[k] == v for k, v in written.items())
    return {"consolidated": consolidated, "pending": pending, "memories": len(written)}
