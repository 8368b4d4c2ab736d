"""Session-start latency (``POST /v1/sessions`` through the local service) against the number
of pending observations (10 to 10,000, 200 facts) and against the number of facts (10 to
1,000, 100 pending).

The local service (``build_app`` + ``LocalService``, in-process, keep-alive HTTP client) runs on
a private ``redis-server`` and an embedded PostgreSQL. Before every timed request exactly the
wanted number of observations is appended straight to Redis (``RedisBehaviourStore.append``,
untimed, keys cycling over the existing facts so the fact count stays put), so each session
consolidates that many pending observations, then recalls (no memories: recall's cost is
measured by ``bench_recall``). Beside each point: the HTTP floor of the same server (``GET
/v1/tools``: API Gateway emulation, token verification, Lambda dispatch, no store).

p50 and p99 per point. ``ENGRAM_BENCH_QUICK=1`` runs fewer requests.
"""

from __future__ import annotations

import os
import statistics
import time
import uuid
from pathlib import Path
from typing import Any

import httpx
import redis

from bench.bench_consolidation import redis_url
from bench.bench_ingest import observations
from bench.local import embedded_postgres, serve
from engram.adapters.redis_behaviour import RedisBehaviourStore

QUICK = os.environ.get("ENGRAM_BENCH_QUICK") == "1"
PENDING = (10, 100, 1_000, 10_000)
FACTS = (10, 200, 1_000)
BASE_FACTS = 200
BASE_PENDING = 100


def repeats(pending: int) -> int:
    if QUICK:
        return 3 if pending >= 10_000 else 10
    return 10 if pending >= 10_000 else 40


def dist(values: list[float]) -> dict[str, float]:
    ordered = sorted(values)
    return {
        "p50": round(statistics.median(ordered), 3),
        "p99": round(ordered[min(len(ordered) - 1, int(len(ordered) * 0.99))], 3),
        "n": len(ordered),
    }


def run(results_dir: Path) -> dict[str, Any]:
    from engram.bootstrap import set_container

    os.environ.setdefault("POWERTOOLS_METRICS_DISABLED", "true")
    os.environ.setdefault("POWERTOOLS_TRACE_DISABLED", "true")
    os.environ.setdefault("POWERTOOLS_LOG_LEVEL", "WARNING")
    with embedded_postgres("engram-bench-session-") as (database_url, root), redis_url() as url:
        prefix = f"bs{uuid.uuid4().hex[:6]}"
        served = serve(
            url,
            prefix,
            root,
            database_url=database_url,
            consolidation_budget_ms=5_000,  # measure the work, do not cut it off
        )
        client = redis.Redis.from_url(url, socket_timeout=30)
        store = RedisBehaviourStore(client, prefix=prefix)
        try:
            by_pending, by_facts, floor = measure(served.service.url, served.signer, store)
        finally:
            served.service.stop()
            set_container(None)
            client.close()
    lines = [f"   {'pending':>8} {'facts':>6} {'p50 ms':>8} {'p99 ms':>8}"]
    for row in [*by_pending, *by_facts]:
        lines.append(
            f"   {row['pendingObservations']:>8} {row['facts']:>6} "
            f"{row['sessionMs']['p50']:>8} {row['sessionMs']['p99']:>8}"
        )
    lines.append(f"   HTTP floor (GET /v1/tools): p50 {floor['p50']} ms, p99 {floor['p99']} ms")
    return {
        "quick": QUICK,
        "byPending": by_pending,
        "byFacts": by_facts,
        "httpFloorMs": floor,
        "summary": "\n".join(lines),
    }


def measure(
    base: str, signer: Any, store: RedisBehaviourStore
) -> tuple[list[dict[str, Any]], list[dict[str, Any]], dict[str, float]]:
    by_pending: list[dict[str, Any]] = []
    by_facts: list[dict[str, Any]] = []
    points = [(p, BASE_FACTS, by_pending) for p in PENDING]
    points += [(BASE_PENDING, f, by_facts) for f in FACTS]
    floor_ms: list[float] = []
    for index, (pending, facts, out) in enumerate(points):
        user = f"u{index}"
        identity = f"bench:{user}"
        token = signer.issue(user, "bench")
        with httpx.Client(
            base_url=base, headers={"Authorization": f"Bearer {token}"}, timeout=60
        ) as http:
            # the facts first: one observation per fact key, consolidated by a first session
            store.append(identity, observations(identity, facts, tools=facts))
            first = http.post("/v1/sessions", json={})
            if first.status_code != 200 or len(first.json()["facts"]) != facts:
                raise RuntimeError(f"fact setup failed: {first.status_code} {first.text[:200]}")
            for _ in range(3):  # warm-up
                store.append(identity, observations(identity, pending, tools=facts))
                http.post("/v1/sessions", json={})
            samples: list[float] = []
            degraded = 0
            for r in range(repeats(pending)):
                store.append(identity, observations(identity, pending, tools=facts, start=r))
                t0 = time.perf_counter()
                res = http.post("/v1/sessions", json={})
                samples.append((time.perf_counter() - t0) * 1000)
                body = res.json()
                if res.status_code != 200:
                    raise RuntimeError(f"session answered {res.status_code}: {res.text[:200]}")
                degraded += bool(body["degraded"])
                t0 = time.perf_counter()
                http.get("/v1/tools")
                floor_ms.append((time.perf_counter() - t0) * 1000)
            out.append(
                {
                    "pendingObservations": pending,
                    "facts": facts,
                    "sessionMs": dist(samples),
                    "degradedResponses": degraded,
                }
            )
    return by_pending, by_facts, dist(floor_ms)


if __name__ == "__main__":
    from bench.__main__ import main

    raise SystemExit(main(["session_curve"]))
