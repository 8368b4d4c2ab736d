"""Ingest: the consumer at growing batch sizes beside the store's own append, Redis round
trips per batch, ``POST /v1/observations`` by request size, the cost per million observations,
and the load run with reconciliation.

On a private ``redis-server`` (or ``REDIS_URL``):

1. ``append``: ``RedisBehaviourStore.append`` of one identity's observations in batches of 10,
   100 and 1,000 (one ``EVALSHA`` each) — the storage step alone, the floor of the consumer;
2. ``consumer``: ``functions.ingest_consumer.handler`` with SQS-shaped events carrying 10, 100
   and 1,000 observations (messages of one 10-observation request each, from ``IDENTITIES``
   users in turn): Powertools, JSON, validation, the grouped append. Reported beside the
   append figure of the same batch size (target: >= 25,000 observations/s and >= 0.5x the
   append at 100), with the Redis round trips of each batch counted on the wire (a connection
   class counting every write to the socket: one per command or pipeline) against the distinct
   identities of the batch (target: at most one each), and the server's own count of
   ``EVALSHA`` calls (``INFO commandstats``);
3. ``legacy``: the consumer as it was before one message per request — Powertools'
   record-by-record ``BatchProcessor``, one observation per message and one store call each —
   at SQS batches of 10, for the cost model's "before";
4. ``httpSizes``: ``POST /v1/observations`` with 1, 10 and 100 observations, taking turns, one
   client, through the local service (API Gateway emulation, token verification, the ingest
   handler, the durable local queue: one commit per queue call), the consumer paused, each
   body encoded before its clock starts: p50/p99, the queue calls per request (target: 1) and
   p50 at 100 over p50 at 1 (target: <= 1.5);
5. ``handlerMs``: the ingest handler alone (in process, an in-memory queue) per request of
   1/10/100 observations, now and the way it sent before (one message per observation, one
   ``SendMessageBatch`` per ten): the Lambda durations of the cost model;
6. ``http``: the end-to-end rate (100 observations per request, 4 clients, until the queue is
   drained); the floor ``redis-benchmark -t zadd -P 16``; ``load``: the stress tier's load
   generator, reconciled (every 202 in Redis exactly once); written to ``load.json`` too;
7. ``cost``: dollars per million observations before and after (``bench.cost_model``), from the
   figures above, the prod stage's memory sizes and docs/deployment.md's price table.

Throughputs are medians (and the worst run) over repeated runs; latencies are p50/p99.
``ENGRAM_BENCH_QUICK=1`` runs fewer and smaller repetitions.
"""

from __future__ import annotations

import json
import math
import os
import shutil
import statistics
import tempfile
import threading
import time
import uuid
from collections.abc import Sequence
from pathlib import Path
from typing import Any

import httpx
import redis

from bench import cost_model
from bench.bench_consolidation import redis_benchmark_csv, redis_url
from bench.local import embedded_postgres, serve
from engram.adapters.redis_behaviour import RedisBehaviourStore
from engram.behaviour.models import Observation, ObservationType

QUICK = os.environ.get("ENGRAM_BENCH_QUICK") == "1"
BATCH = 10
BATCHES = (10, 100, 1000)
PER_MESSAGE = 10  # observations per message: one request of ten
IDENTITIES = 4
PER_REQUEST = 100
HTTP_CLIENTS = 4
HTTP_SIZES = (1, 10, 100)
TARGET_RATE = 25_000
TARGET_RATIO = 0.5
TARGET_HTTP_RATIO = 1.5


def pct(values: list[float], q: float) -> float:
    ordered = sorted(values)
    return round(ordered[min(len(ordered) - 1, int(len(ordered) * q))], 3)


def dist(values: list[float]) -> dict[str, float]:
    return {"p50": round(statistics.median(values), 3), "p99": pct(values, 0.99), "n": len(values)}


def observations(identity: str, n: int, *, tools: int = 50, start: int = 0) -> list[Observation]:
    """``n`` tool successes of ``identity`` a millisecond apart, naming ``tools`` tools in turn
    from the ``start``-th."""
    now = int(time.time() * 1000)
    named = [f"tool_{(start + i) % tools}" for i in range(n)]
    return [
        Observation.model_construct(
            id=uuid.uuid4().hex,
            identity_id=identity,
            type=ObservationType.TOOL_SUCCESS,
            content=f"{tool} ok",
            metadata={"toolName": tool, "durationMs": 12},
            created_at=now + i,
        )
        for i, tool in enumerate(named)
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


# --- counting Redis: round trips on the wire, and the server's own statistics --------------
class Wire:
    """Writes to Redis sockets: one per command sent alone or per pipeline."""

    writes = 0


class CountingConnection(redis.Connection):
    def send_packed_command(self, command: Any, check_health: bool = True) -> None:
        Wire.writes += 1
        super().send_packed_command(command, check_health)


def counting_client(url: str) -> redis.Redis:
    pool = redis.ConnectionPool.from_url(url, connection_class=CountingConnection)
    return redis.Redis(connection_pool=pool, socket_timeout=30)


def server_stats(client: redis.Redis) -> dict[str, Any]:
    """Commands (calls, microseconds) and network bytes of the server, ``INFO`` excluded."""
    commands = client.info("commandstats")
    stats = client.info("stats")
    calls: dict[str, int] = {}
    usec: dict[str, int] = {}
    for key, value in commands.items():
        name = key.removeprefix("cmdstat_")
        if name != "info":
            calls[name] = int(value["calls"])
            usec[name] = int(value["usec"])
    return {
        "calls": calls,
        "usec": usec,
        "bytes": int(stats["total_net_input_bytes"]) + int(stats["total_net_output_bytes"]),
    }


def stats_delta(before: dict[str, Any], after: dict[str, Any]) -> dict[str, Any]:
    names = set(after["calls"])
    calls = {n: after["calls"][n] - before["calls"].get(n, 0) for n in names}
    usec = {n: after["usec"][n] - before["usec"].get(n, 0) for n in names}
    return {
        "calls": {n: c for n, c in calls.items() if c},
        "usec": {n: u for n, u in usec.items() if calls[n]},
        "bytes": after["bytes"] - before["bytes"],
    }


def add_delta(total: dict[str, Any], delta: dict[str, Any]) -> None:
    for name, calls in delta["calls"].items():
        total["calls"][name] = total["calls"].get(name, 0) + calls
    total["bytes"] += delta["bytes"]


def ecpus_of(delta: dict[str, Any]) -> float:
    """ECPUs of the work in ``delta`` (``cost_model.ecpus``): every command the server ran,
    those a script ran included (``INFO commandstats`` counts them), and the bytes moved."""
    return cost_model.ecpus(sum(delta["calls"].values()), delta["bytes"])


# --- 1./2. the store's append and the consumer, interleaved run by run ----------------------
def sqs_event(bodies: Sequence[str]) -> dict[str, Any]:
    return {
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
            for body in bodies
        ]
    }


def consumer_container(url: str) -> Any:
    os.environ.setdefault("POWERTOOLS_METRICS_DISABLED", "true")
    os.environ.setdefault("POWERTOOLS_TRACE_DISABLED", "true")
    os.environ.setdefault("POWERTOOLS_LOG_LEVEL", "WARNING")
    from engram.bootstrap import Container
    from engram.settings import Settings

    settings = Settings(redis_url=url, redis_key_prefix=f"bc{uuid.uuid4().hex[:6]}")
    return Container(settings, redis=counting_client(url))


def new_shape_events(run: str, n: int, batch: int) -> tuple[list[dict[str, Any]], list[int]]:
    """Events of ``batch`` observations: messages of ``PER_MESSAGE``, ``IDENTITIES`` users in
    turn; and the distinct identities of each event."""
    from engram.use_cases.ingest_messages import encode_messages, observation_item

    bodies: list[tuple[str, str]] = []
    for m in range(n // PER_MESSAGE):
        identity = f"bench:consumer{run}-{m % IDENTITIES}"
        items = [observation_item(o) for o in observations(identity, PER_MESSAGE)]
        [body] = encode_messages(identity, items, 256 * 1024)
        bodies.append((identity, body))
    per_event = max(1, batch // PER_MESSAGE)
    events, distinct = [], []
    for i in range(0, len(bodies), per_event):
        chunk = bodies[i : i + per_event]
        events.append(sqs_event([b for _, b in chunk]))
        distinct.append(len({ident for ident, _ in chunk}))
    return events, distinct


def append_run(
    store: RedisBehaviourStore, batch: int, n: int, run: str
) -> tuple[float, list[float]]:
    """One identity's ``n`` observations appended ``batch`` at a time: (seconds, ms per call)."""
    identity = f"bench:append{batch}-{run}"
    obs = observations(identity, n)
    calls: list[float] = []
    started = time.perf_counter()
    for i in range(0, n, batch):
        t0 = time.perf_counter()
        store.append(identity, obs[i : i + batch])
        calls.append((time.perf_counter() - t0) * 1000)
    return time.perf_counter() - started, calls


def consumer_run(
    handler: Any, batch: int, n: int, run: str
) -> tuple[float, list[float], list[int], list[int]]:
    """``n`` observations through the consumer handler in events of ``batch``: (seconds, ms per
    event, round trips per event, distinct identities per event)."""
    from engram.local.lambda_context import FakeLambdaContext

    events, distinct = new_shape_events(run, n, batch)
    batch_ms: list[float] = []
    trips: list[int] = []
    started = time.perf_counter()
    for event in events:
        writes = Wire.writes
        t0 = time.perf_counter()
        response = handler(event, FakeLambdaContext())
        batch_ms.append((time.perf_counter() - t0) * 1000)
        trips.append(Wire.writes - writes)
        if response.get("batchItemFailures"):
            raise RuntimeError(f"consumer reported failures: {response}")
    return time.perf_counter() - started, batch_ms, trips, distinct


def bench_batches(url: str, n: int, repeats: int) -> dict[str, Any]:
    """For each batch size: the store's append and the consumer, one run of each in turn (so
    both meet the same load on a shared machine), the consumer's round trips counted."""
    from functions.ingest_consumer import handler as consumer

    from engram.bootstrap import set_container

    client = redis.Redis.from_url(url, socket_timeout=30)
    store = RedisBehaviourStore(client, prefix=f"bi{uuid.uuid4().hex[:6]}")
    container = consumer_container(url)
    old = set_container(container)
    out: dict[str, Any] = {}
    try:
        consumer_run(consumer.handler, PER_MESSAGE, PER_MESSAGE, "warm")  # scripts loaded
        append_run(store, PER_MESSAGE, PER_MESSAGE, "warm")
        for batch in BATCHES:
            appends: list[tuple[int, float]] = []
            consumed: list[tuple[int, float]] = []
            append_ms: list[float] = []
            batch_ms: list[float] = []
            trips: list[int] = []
            identities: list[int] = []
            ratios: list[float] = []
            memory: list[float] = []
            consumer_delta: dict[str, Any] = {"calls": {}, "bytes": 0}
            for r in range(repeats):
                used = int(client.info("memory")["used_memory"])
                seconds, calls = append_run(store, batch, n, str(r))
                memory.append((int(client.info("memory")["used_memory"]) - used) / n)
                appends.append((n, seconds))
                append_ms += calls
                before = server_stats(client)
                c_seconds, c_ms, c_trips, c_ids = consumer_run(
                    consumer.handler, batch, n, f"{batch}-{r}"
                )
                add_delta(consumer_delta, stats_delta(before, server_stats(client)))
                consumed.append((n, c_seconds))
                batch_ms += c_ms
                trips += c_trips
                identities += c_ids
                ratios.append(seconds / c_seconds)
            append = throughput(appends, append_ms)
            append["storedBytesPerObservation"] = round(statistics.median(memory), 1)
            result = throughput(consumed, batch_ms)
            result["observationsPerMessage"] = PER_MESSAGE
            result["roundTrips"] = {
                "perBatchMax": max(trips),
                "perBatchMedian": statistics.median(trips),
                "identitiesPerBatchMax": max(identities),
                "atMostOnePerIdentity": all(t <= i for t, i in zip(trips, identities, strict=True)),
                "evalshaPerBatch": round(consumer_delta["calls"].get("evalsha", 0) / len(trips), 2),
            }
            stored = n * repeats
            result["redisCommandsPerObservation"] = round(
                sum(consumer_delta["calls"].values()) / stored, 2
            )
            result["ecpusPerObservation"] = round(ecpus_of(consumer_delta) / stored, 4)
            out[str(batch)] = {
                "append": append,
                "consumer": result,
                "ratioToAppend": round(statistics.median(ratios), 3),
                "ratioToAppendWorst": round(min(ratios), 3),
            }
    finally:
        set_container(old)
        container.close()
        client.close()
    return out


def bench_legacy_consumer(url: str, n: int, repeats: int) -> dict[str, Any]:
    """The consumer before one message per request (see the module docstring)."""
    from aws_lambda_powertools.utilities.batch import (
        BatchProcessor,
        EventType,
        process_partial_response,
    )

    from engram.bootstrap import get_container, set_container
    from engram.local.lambda_context import FakeLambdaContext

    processor = BatchProcessor(event_type=EventType.SQS, raise_on_entire_batch_failure=False)

    def record_observation(record: Any) -> int:
        observation = Observation.model_validate_json(record.body)
        return get_container().behaviour.record(observation.identity_id, [observation])

    container = consumer_container(url)
    admin = redis.Redis.from_url(url)
    old = set_container(container)
    runs: list[tuple[int, float]] = []
    batch_ms: list[float] = []
    try:
        before = server_stats(admin)
        for r in range(repeats):
            bodies = [
                o.model_dump_json(by_alias=True, exclude_none=True)
                for o in observations(f"bench:legacy{r}", n)
            ]
            events = [sqs_event(bodies[i : i + BATCH]) for i in range(0, n, BATCH)]
            started = time.perf_counter()
            for event in events:
                t0 = time.perf_counter()
                process_partial_response(
                    event=event,
                    record_handler=record_observation,
                    processor=processor,
                    context=FakeLambdaContext(),
                )
                batch_ms.append((time.perf_counter() - t0) * 1000)
            runs.append((n, time.perf_counter() - started))
        delta = stats_delta(before, server_stats(admin))
    finally:
        set_container(old)
        container.close()
        admin.close()
    out = throughput(runs, batch_ms)
    out["batch"] = BATCH
    out["messageBytes"] = round(statistics.median(len(b.encode()) for b in bodies))
    out["redisCommandsPerObservation"] = round(sum(delta["calls"].values()) / (n * repeats), 2)
    out["ecpusPerObservation"] = round(ecpus_of(delta) / (n * repeats), 4)
    return out


# --- 4. POST /v1/observations by size, through the local service -----------------------------
def observation_body(size: int, tag: str) -> dict[str, Any]:
    return {
        "observations": [
            {
                "type": "tool_success",
                "content": f"call {tag}.{j}",
                "metadata": {"toolName": f"tool_{j % 50}", "durationMs": 12},
            }
            for j in range(size)
        ]
    }


def local_service(
    url: str, data_dir: Path, prefix: str, user: str = "sizes"
) -> tuple[Any, Any, str]:
    """The local service over Redis alone (no database, no rate limit) and a token of
    ``user``."""
    served = serve(url, prefix, data_dir, observations_per_minute=10**9)
    return served.app, served.service, served.signer.issue(user, "bench")


def bench_http_sizes(url: str, requests: int, data_dir: Path) -> dict[str, Any]:
    from engram.bootstrap import set_container

    app, service, token = local_service(url, data_dir, f"bs{uuid.uuid4().hex[:6]}")
    queue = app.ingest_queue
    assert queue is not None
    calls: list[int] = []
    send = queue.send_message_batch

    def counted(Entries: Any) -> dict[str, Any]:  # noqa: N803
        calls.append(len(Entries))
        return send(Entries)

    queue.send_message_batch = counted  # type: ignore[method-assign]
    queue.stop()  # the consumer waits: only the ingest path is timed
    out: dict[str, Any] = {}
    accepted = 0
    try:
        headers = {"Authorization": f"Bearer {token}", "Content-Type": "application/json"}
        samples: dict[int, list[float]] = {size: [] for size in HTTP_SIZES}
        sends: dict[int, list[int]] = {size: [] for size in HTTP_SIZES}
        with httpx.Client(base_url=service.url, headers=headers, timeout=60) as http:
            # the sizes take turns, request by request, so each meets the same conditions; the
            # client encodes its body before the clock starts (the service's time is measured)
            for i in range(requests + 5):
                for size in HTTP_SIZES:
                    body = json.dumps(observation_body(size, f"{size}.{i}")).encode()
                    before = len(calls)
                    t0 = time.perf_counter()
                    res = http.post("/v1/observations", content=body)
                    if i >= 5:  # warm-up
                        samples[size].append((time.perf_counter() - t0) * 1000)
                    if res.status_code != 202:
                        raise RuntimeError(f"ingest answered {res.status_code}: {res.text}")
                    sends[size] += calls[before:]
                    accepted += len(res.json()["ids"])
        for size in HTTP_SIZES:
            out[str(size)] = {
                "requestMs": dist(samples[size]),
                "queueCallsPerRequest": round(len(sends[size]) / (requests + 5), 3),
                "messagesPerRequest": round(sum(sends[size]) / (requests + 5), 3),
            }
        queue.start()
        drained = queue.drain(300)
    finally:
        service.stop()
        set_container(None)
    out["ratioP50At100ToP50At1"] = round(
        out["100"]["requestMs"]["p50"] / out["1"]["requestMs"]["p50"], 3
    )
    out["drained"] = drained
    out["deadLetters"] = len(queue.dead_letters)
    out["accepted"] = accepted
    return out


# --- 5. the ingest handler alone, now and as it sent before ---------------------------------
def bench_handler_ms(url: str, requests: int) -> dict[str, Any]:
    from functions.ingest import handler as ingest_fn

    from engram.adapters.sqs import SqsSender
    from engram.bootstrap import Container, set_container
    from engram.local.gateway import build_event
    from engram.local.lambda_context import FakeLambdaContext
    from engram.local.sqs import LocalQueue, LocalSqs
    from engram.settings import Settings
    from engram.use_cases.ingest import IngestService

    class LegacyIngest(IngestService):
        """Sends as before: one message per observation (its JSON with ``identityId``)."""

        def _queue_items(self, caller: Any, items: Any) -> Any:
            from engram.use_cases.ingest import Accepted

            if self.limiter is not None and items:
                self.limiter.check(caller.identity_id, cost=len(items))
            identity = {"identityId": caller.identity_id}
            bodies = [json.dumps(item | identity, separators=(",", ":")) for item in items]
            self._send(self.queue, bodies, "ingest")
            return Accepted(ids=[str(item["id"]) for item in items])

    claims = {"sub": "handler", "custom:team": "bench", "scope": "engram/user"}
    out: dict[str, Any] = {}
    for mode in ("after", "before"):
        sqs = LocalSqs()
        queue = LocalQueue("ingest")  # in memory: the SQS call itself is the cost model's
        sqs.add_queue(queue)
        calls: list[int] = []
        send = queue.send_message_batch

        def counted(Entries: Any, send: Any = send, calls: list[int] = calls) -> dict[str, Any]:  # noqa: N803
            calls.append(len(Entries))
            return send(Entries)

        queue.send_message_batch = counted  # type: ignore[method-assign]
        settings = Settings(
            redis_url=url,
            redis_key_prefix=f"bm{uuid.uuid4().hex[:6]}",
            observations_per_minute=10**9,
        )
        container = first = Container(settings, sqs=sqs, ingest_queue=SqsSender(sqs, queue.url))
        if mode == "before":
            legacy = LegacyIngest(
                container.ingest_queue,
                limiter=container.ingest_limiter,
                keys=container.ingest_keys,
                observation_retention_days=settings.observation_retention_days,
                retry_window_s=settings.ingest_retry_window_s,
            )
            container = Container(
                settings, sqs=sqs, ingest_queue=container.ingest_queue, ingest=legacy
            )
        old = set_container(container)
        try:
            for size in HTTP_SIZES:
                samples: list[float] = []
                calls.clear()
                for i in range(requests + 5):
                    raw = json.dumps(observation_body(size, f"{mode}.{size}.{i}")).encode()
                    event = build_event(
                        method="POST",
                        raw_path="/v1/observations",
                        raw_query="",
                        headers=[("content-type", "application/json")],
                        body=raw,
                        route_key="POST /v1/observations",
                        path_parameters={},
                        source_ip="127.0.0.1",
                        claims=claims,
                    )
                    t0 = time.perf_counter()
                    res = ingest_fn.handler(event, FakeLambdaContext())
                    if i >= 5:
                        samples.append((time.perf_counter() - t0) * 1000)
                    if res["statusCode"] != 202:
                        raise RuntimeError(f"ingest answered {res['statusCode']}: {res['body']}")
                out.setdefault(mode, {})[str(size)] = {
                    "handlerMs": dist(samples),
                    "queueCallsPerRequest": round(len(calls) / (requests + 5), 3),
                    "messagesPerRequest": round(sum(calls) / (requests + 5), 3),
                    "messageBytes": len(queue.messages()[-1].body.encode()),
                }
        finally:
            set_container(old)
            container.close()
            first.close()
    return out


def bench_http(url: str, n: int, repeats: int, data_dir: Path) -> dict[str, Any]:
    from engram.bootstrap import set_container

    runs: list[tuple[int, float]] = []
    request_ms: list[float] = []
    lock = threading.Lock()
    for r in range(repeats):
        app, service, token = local_service(url, data_dir, f"bh{uuid.uuid4().hex[:6]}", f"user{r}")
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
    rates = []
    for _ in range(3):
        args = ("-t", "zadd", "-P", "16", "-n", str(requests), "-q")
        rows = redis_benchmark_csv(url, *args, timeout=300)
        rates += [float(row[1]) for row in rows or [] if row[0].startswith("ZADD")]
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
    from tests.integration.stress.loadgen import reconcile, run_load

    from engram.bootstrap import set_container

    with embedded_postgres("engram-bench-load-") as (database_url, _):
        prefix = f"bl{uuid.uuid4().hex[:6]}"
        served = serve(url, prefix, data_dir, database_url=database_url)
        app, service = served.app, served.service
        try:
            load = run_load(
                service.url, served.signer.issue, clients=8, iterations=10 if QUICK else 40
            )
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


def cost(
    legacy: dict[str, Any],
    consumer100: dict[str, Any],
    append: dict[str, Any],
    handler: dict[str, Any],
    size: int,
) -> dict[str, Any]:
    """Dollars per million observations at ``size`` observations per request, before/after."""
    stage = cost_model.stage_values()
    stored = append["storedBytesPerObservation"]
    before = handler["before"][str(size)]
    after = handler["after"][str(size)]
    runs = {
        "before": cost_model.IngestRun(
            observations_per_request=size,
            messages_per_request=size,
            message_bytes=before["messageBytes"],
            queue_calls_per_request=math.ceil(size / BATCH),
            ingest_handler_ms=before["handlerMs"]["p50"],
            consumer_obs_per_s=legacy["observationsPerSecond"]["median"],
            observations_per_message=1,
            redis_ecpus_per_observation=legacy["ecpusPerObservation"],
            request_ecpus=1.0,
            stored_bytes_per_observation=stored,
        ),
        "after": cost_model.IngestRun(
            observations_per_request=size,
            messages_per_request=round(after["messagesPerRequest"]),
            message_bytes=after["messageBytes"],
            queue_calls_per_request=round(after["queueCallsPerRequest"]),
            ingest_handler_ms=after["handlerMs"]["p50"],
            consumer_obs_per_s=consumer100["observationsPerSecond"]["median"],
            observations_per_message=size,
            redis_ecpus_per_observation=consumer100["ecpusPerObservation"],
            request_ecpus=1.0,
            stored_bytes_per_observation=stored,
        ),
    }
    return {
        "stage": stage,
        "assumptions": {
            "sqsCallMs": cost_model.SQS_CALL_MS,
            "storedHours": cost_model.STORED_HOURS,
            "rateLimiterEcpusPerRequest": 1.0,
        },
        **{k: cost_model.per_million_observations(v, stage) for k, v in runs.items()},
    }


def run(results_dir: Path) -> dict[str, Any]:
    n = 10_000
    repeats = 5 if QUICK else 9
    sized = 30 if QUICK else 200
    data_dir = Path(tempfile.mkdtemp(prefix="engram-bench-ingest-"))
    try:
        with redis_url() as url:
            info = redis.Redis.from_url(url).info("server")
            batches = bench_batches(url, n, repeats)
            legacy = bench_legacy_consumer(url, n, repeats)
            sizes = bench_http_sizes(url, sized, data_dir / "sizes")
            handler = bench_handler_ms(url, sized)
            http = bench_http(url, n, max(2, repeats // 2), data_dir)
            zadd = redis_benchmark_zadd(url, 200_000 if QUICK else 1_000_000)
            load = bench_load(url, results_dir, data_dir)
    finally:
        shutil.rmtree(data_dir, ignore_errors=True)
    appends = {int(b): v["append"] for b, v in batches.items()}
    consumers = {int(b): v["consumer"] for b, v in batches.items()}
    ratios: dict[str, Any] = {}
    if zadd:
        floor = zadd["zaddPerSecond"]["median"]
        for name, part in (
            ("append", appends[BATCH]),
            ("consumer", consumers[BATCH]),
            ("http", http),
        ):
            ratios[name] = round(part["observationsPerSecond"]["median"] / floor, 4)
    by_batch: dict[str, Any] = {}
    for b in BATCHES:
        by_batch[str(b)] = {
            "consumerPerSecond": consumers[b]["observationsPerSecond"]["median"],
            "appendPerSecond": appends[b]["observationsPerSecond"]["median"],
            "ratioToAppend": batches[str(b)]["ratioToAppend"],
            "ratioToAppendWorst": batches[str(b)]["ratioToAppendWorst"],
            "roundTrips": consumers[b]["roundTrips"],
            "redisCommandsPerObservation": consumers[b]["redisCommandsPerObservation"],
        }
    at100 = by_batch["100"]
    targets = {
        "consumerAt100PerSecond": at100["consumerPerSecond"] >= TARGET_RATE,
        "consumerAt100RatioToAppend": at100["ratioToAppend"] >= TARGET_RATIO,
        "roundTripsAtMostOnePerIdentity": all(
            c["roundTrips"]["atMostOnePerIdentity"] for c in consumers.values()
        ),
        "oneQueueCallPerRequest": all(
            sizes[str(s)]["queueCallsPerRequest"] == 1 for s in HTTP_SIZES
        ),
        "httpP50At100Within1.5xOf1": sizes["ratioP50At100ToP50At1"] <= TARGET_HTTP_RATIO,
    }
    costs = {str(s): cost(legacy, consumers[100], appends[100], handler, s) for s in (10, 100)}
    lines = [
        "   batch  consumer obs/s   append obs/s   ratio   round trips/batch (max) vs identities"
    ]
    for b in BATCHES:
        row = by_batch[str(b)]
        rt = row["roundTrips"]
        lines.append(
            f"   {b:>5}  {row['consumerPerSecond']:>14,.0f}  {row['appendPerSecond']:>13,.0f}"
            f"   {row['ratioToAppend']:>5}   {rt['perBatchMax']} vs {rt['identitiesPerBatchMax']}"
            f" (EVALSHA/batch {rt['evalshaPerBatch']})"
        )
    lines.append(
        f"   legacy consumer (one observation per message, batches of {BATCH}): "
        f"{legacy['observationsPerSecond']['median']:,.0f} obs/s"
    )
    lines.append(
        "   POST /v1/observations p50: "
        + ", ".join(
            f"{s} obs {sizes[str(s)]['requestMs']['p50']} ms "
            f"({sizes[str(s)]['queueCallsPerRequest']} queue calls)"
            for s in HTTP_SIZES
        )
        + f"; p50 100/1 = {sizes['ratioP50At100ToP50At1']}"
    )
    lines.append(
        f"   http     {http['observationsPerSecond']['median']:>10,.0f} obs/s "
        f"({PER_REQUEST}/request, {HTTP_CLIENTS} clients: p50 {http['requestMs']['p50']} ms, "
        f"p99 {http['requestMs']['p99']})"
    )
    if zadd:
        lines.append(
            f"   floor    {zadd['zaddPerSecond']['median']:>10,.0f} ZADD/s "
            f"(redis-benchmark -P 16); ratios {ratios}"
        )
    for s, c in costs.items():
        lines.append(
            f"   cost per million observations ({s}/request, prices of "
            f"{c['after']['priceTableDate']}): before ${c['before']['total']:.3f}, "
            f"after ${c['after']['total']:.3f}; Redis storage while kept (both): "
            f"{c['after']['storageWhileKept']}"
        )
    lines.append(f"   targets {targets}")
    lines.append(
        f"   load     {load['requestsPerSecond']} req/s, {load['observationsPerSecond']} obs/s, "
        f"errors {load['errorCount']}, reconciled {load['reconciliation']['ok']}"
    )
    return {
        "quick": QUICK,
        "redis": {"version": info.get("redis_version")},
        "append": appends[BATCH],
        "consumer": consumers[BATCH],
        "batches": batches,
        "byBatch": by_batch,
        "legacyConsumer": legacy,
        "httpSizes": sizes,
        "handlerMs": handler,
        "http": http,
        "redisBenchmarkZadd": zadd,
        "ratioToZadd": ratios,
        "targets": targets,
        "costPerMillionObservations": costs,
        "load": load,
        "summary": "\n".join(lines),
    }


if __name__ == "__main__":
    from bench.__main__ import main

    raise SystemExit(main(["ingest"]))
