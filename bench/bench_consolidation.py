"""Consolidation on a local redis-server: latency, round trips, and the ratio to the floor.

For 10 / 100 / 1,000 / 10,000 pending observations against 200 existing facts, each iteration
appends fresh observations (untimed), times the floors, then times ``consolidate()`` (read +
plan + fenced commit), and counts the round trips the store made and the commands Redis
processed. Floors, interleaved with the consolidations so they see the same machine load:

- ``floorMs``: one round trip reading the keys a consolidation reads, with
  the same pipeline ``read_round`` uses (MULTI/EXEC: state fields, pending aggregate, facts);
- ``ioFloorMs``: the I/O a round cannot avoid — the same reads plus writing back the same
  fact payloads a round writes, in one MULTI/EXEC round trip (no Lua, no Python planning);
- ``naiveFloorMs``: one pipelined read of the pending observations themselves plus the facts
  (what a design without the pending aggregate, reading the log itself, would have to read).

Consolidated observations are pruned between iterations (untimed) so every iteration sees the
same sizes. ``redis-benchmark`` (PING, one
client) is recorded alongside as the machine's raw round-trip floor.

Uses ``REDIS_URL`` when set, else starts a private ``redis-server`` from PATH.
"""

from __future__ import annotations

import contextlib
import os
import shutil
import socket
import statistics
import subprocess
import tempfile
import time
import uuid
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import redis
from pydantic import TypeAdapter

from engram.adapters.redis_behaviour import RedisBehaviourStore
from engram.behaviour.consolidation import consolidate
from engram.behaviour.decay import ExponentialDecay
from engram.behaviour.models import Fact, Observation, ObservationType
from engram.behaviour.ports import RoundInput
from engram.clock import FakeClock

SIZES = (10, 100, 1_000, 10_000)
ITERATIONS = {10: 300, 100: 300, 1_000: 200, 10_000: 25}
FACTS = 200
TARGET_P99_MS = 15.0
TARGET_RATIO = 3.0


@contextlib.contextmanager
def redis_url() -> Iterator[str]:
    url = os.environ.get("REDIS_URL")
    if url:
        yield url
        return
    exe = shutil.which("redis-server")
    if exe is None:
        raise RuntimeError("redis-server not on PATH and REDIS_URL unset")
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        port = s.getsockname()[1]
    workdir = tempfile.mkdtemp(prefix="engram-bench-")
    proc = subprocess.Popen(
        [
            exe,
            "--port",
            str(port),
            "--bind",
            "127.0.0.1",
            "--save",
            "",
            "--appendonly",
            "no",
            "--dir",
            workdir,
        ],
        stdout=subprocess.DEVNULL,
        stderr=subprocess.DEVNULL,
    )
    try:
        client = redis.Redis(port=port)
        for _ in range(200):
            try:
                client.ping()
                break
            except redis.ConnectionError:
                time.sleep(0.05)
        client.close()
        yield f"redis://127.0.0.1:{port}/0"
    finally:
        proc.kill()
        proc.wait()
        shutil.rmtree(workdir, ignore_errors=True)


def kinds() -> list[tuple[ObservationType, dict[str, Any]]]:
    """200 distinct fact keys: 50 tools ok, 50 tools failing, 50 entities, 50 domains."""
    out: list[tuple[ObservationType, dict[str, Any]]] = []
    for i in range(50):
        out.append((ObservationType.TOOL_SUCCESS, {"toolName": f"tool_{i}", "durationMs": 12}))
        out.append(
            (
                ObservationType.TOOL_FAILURE,
                {"toolName": f"flaky_{i}", "durationMs": 30, "error": "x"},
            )
        )
        out.append(
            (
                ObservationType.ENTITY_ACCESS,
                {"entityType": "account", "entityId": f"A-{i}", "entityName": f"Account {i}"},
            )
        )
        out.append((ObservationType.QUERY_PATTERN, {"domain": f"domain_{i}", "query": "q" * 40}))
    return out


def subjects(n: int) -> list[str]:
    """The fact subjects the first ``n`` observations of a batch map to."""
    out = []
    for kind, md in kinds()[:n]:
        if kind is ObservationType.TOOL_SUCCESS:
            out.append(f"tool_affinity:{md['toolName']}")
        elif kind is ObservationType.TOOL_FAILURE:
            out.append(f"tool_avoidance:{md['toolName']}")
        elif kind is ObservationType.ENTITY_ACCESS:
            out.append(f"entity_frequency:{md['entityType']}:{md['entityId']}")
        else:
            out.append(f"domain_preference:{md['domain']}")
    return out


def batch(identity: str, n: int, now: int) -> list[Observation]:
    ks = kinds()
    return [
        Observation.model_construct(
            id=uuid.uuid4().hex,
            identity_id=identity,
            type=ks[i % FACTS][0],
            content="observation content of a typical length for a summary line",
            metadata=ks[i % FACTS][1],
            created_at=now,
            seq=None,
        )
        for i in range(n)
    ]


def pct(values: list[float], q: float) -> float:
    ordered = sorted(values)
    return ordered[min(len(ordered) - 1, round(q * (len(ordered) - 1)))]


def floor_read(client: redis.Redis, store: RedisBehaviourStore, identity: str) -> float:
    """The reads of ``read_round`` (state fields, pending aggregate, facts) in the same
    MULTI/EXEC pipeline, one round trip, replies left undecoded."""
    keys = store.keys(identity)
    started = time.perf_counter_ns()
    pipe = client.pipeline(transaction=True)
    pipe.hmget(keys.state, "cursor", "version", "seq", "pmaxts", "gen")
    pipe.hgetall(keys.pending)
    pipe.hvals(keys.facts)
    pipe.execute()
    return (time.perf_counter_ns() - started) / 1e6


def io_floor(
    client: redis.Redis, store: RedisBehaviourStore, identity: str, writes: dict[bytes, bytes]
) -> float:
    """The same reads plus writing ``writes`` (the fact payloads a round writes, as stored) and
    the cursor, in one MULTI/EXEC round trip: the I/O a consolidation cannot avoid."""
    keys = store.keys(identity)
    cursor = client.hget(keys.state, "cursor") or b"0"
    started = time.perf_counter_ns()
    pipe = client.pipeline(transaction=True)
    pipe.hmget(keys.state, "cursor", "version", "seq", "pmaxts", "gen")
    pipe.hgetall(keys.pending)
    pipe.hvals(keys.facts)
    if writes:
        pipe.hset(keys.facts, mapping=writes)  # type: ignore[arg-type]
    pipe.hset(keys.state, "cursor", cursor)
    pipe.execute()
    return (time.perf_counter_ns() - started) / 1e6


def naive_floor_read(client: redis.Redis, store: RedisBehaviourStore, identity: str) -> float:
    """One pipelined read of the pending observations themselves plus the facts: what a
    consolidation without the pending aggregate would cost."""
    keys = store.keys(identity)
    cursor = int(client.hget(keys.state, "cursor") or 0)
    started = time.perf_counter_ns()
    pipe = client.pipeline(transaction=False)
    pipe.hmget(keys.state, "cursor", "version")
    pipe.zrangebyscore(keys.obs, f"({cursor}", "+inf", withscores=True)
    pipe.hvals(keys.facts)
    pipe.execute()
    return (time.perf_counter_ns() - started) / 1e6


def write_floor(client: redis.Redis, key: str, writes: dict[bytes, bytes]) -> float:
    """One MULTI/EXEC round trip writing ``writes`` (the fact payload a round writes) with a
    plain HSET and deleting it again: the second round trip of a read-then-commit design,
    without a script or any Python planning."""
    started = time.perf_counter_ns()
    pipe = client.pipeline(transaction=True)
    if writes:
        pipe.hset(key, mapping=writes)  # type: ignore[arg-type]
    pipe.delete(key)
    pipe.execute()
    return (time.perf_counter_ns() - started) / 1e6


_FACT_LIST: TypeAdapter[list[Fact]] = TypeAdapter(list[Fact])


def decode_only(rows: list[bytes]) -> float:
    """Decoding the stored facts into ``Fact`` objects, nothing else (one pydantic-core call,
    what ``read_round`` does): the CPU a round cannot avoid while it returns pydantic facts."""
    started = time.perf_counter_ns()
    _FACT_LIST.validate_json(b"[" + b",".join(rows) + b"]")
    return (time.perf_counter_ns() - started) / 1e6


class TimedStore(RedisBehaviourStore):
    """The store with its two round trips timed (wall, including their Python decoding and
    encoding), for the breakdown; the plan/rank share is the rest of ``consolidate``."""

    def __init__(self, *args: Any, **kwargs: Any) -> None:
        super().__init__(*args, **kwargs)
        self.read_ms: list[float] = []
        self.commit_ms: list[float] = []

    def read_round(self, identity_id: str) -> RoundInput:
        started = time.perf_counter_ns()
        try:
            return super().read_round(identity_id)
        finally:
            self.read_ms.append((time.perf_counter_ns() - started) / 1e6)

    def commit_round(self, identity_id: str, **kwargs: Any) -> bool:
        started = time.perf_counter_ns()
        try:
            return super().commit_round(identity_id, **kwargs)
        finally:
            self.commit_ms.append((time.perf_counter_ns() - started) / 1e6)


def commands_processed(client: redis.Redis) -> int:
    return int(client.info("stats")["total_commands_processed"])


def measure(client: redis.Redis, n: int) -> dict[str, Any]:
    clock = FakeClock()
    store = TimedStore(client, prefix=f"bench{n}", clock=clock)
    identity = f"bench:{n}"
    decay = ExponentialDecay()

    def once() -> list[Any]:
        return consolidate(
            identity,
            observations=store,
            facts=store,
            checkpoints=store.checkpoints,
            decay=decay,
            now=clock.now_ms(),
        )

    store.append(identity, batch(identity, FACTS, clock.now_ms()))  # the 200 existing facts
    assert len(once()) == FACTS
    consolidation_ms: list[float] = []
    floor_ms: list[float] = []
    io_ms: list[float] = []
    naive_ms: list[float] = []
    write_ms: list[float] = []
    decode_ms: list[float] = []
    # the payloads a round at this size writes: the facts its observations reinforce, or the
    # whole fact set when the round commits through the stage hash (many upserts)
    touched = {f"fact:{s}" for s in subjects(min(n, FACTS))}
    staged = len(touched) >= store.stage_min_upserts
    round_trips: set[int] = set()
    commands: set[int] = set()
    read_ms: list[float] = []
    commit_ms: list[float] = []
    for _ in range(ITERATIONS[n]):
        store.append(identity, batch(identity, n, clock.now_ms()))
        floor_ms.append(floor_read(client, store, identity))
        stored: dict[bytes, bytes] = client.hgetall(store.keys(identity).facts)  # type: ignore[assignment]
        writes = {k: v for k, v in stored.items() if staged or k.decode() in touched}
        io_ms.append(io_floor(client, store, identity, writes))
        naive_ms.append(naive_floor_read(client, store, identity))
        write_ms.append(write_floor(client, f"bench{n}:scratch:{{{identity}}}", writes))
        decode_ms.append(decode_only(list(stored.values())))
        store.read_ms.clear()
        store.commit_ms.clear()
        before_rt, before_cmd = store.round_trips, commands_processed(client)
        started = time.perf_counter_ns()
        facts = once()
        consolidation_ms.append((time.perf_counter_ns() - started) / 1e6)
        read_ms.append(sum(store.read_ms))
        commit_ms.append(sum(store.commit_ms))
        round_trips.add(store.round_trips - before_rt)
        commands.add(commands_processed(client) - before_cmd - 1)  # minus the INFO itself
        assert len(facts) == FACTS
        store.prune(identity, clock.now_ms() + 1)  # untimed: drop what was consolidated
    store.erase(identity)
    p50, p99 = pct(consolidation_ms, 0.5), pct(consolidation_ms, 0.99)
    f50, f99 = pct(floor_ms, 0.5), pct(floor_ms, 0.99)
    io50, io99 = pct(io_ms, 0.5), pct(io_ms, 0.99)
    return {
        "pendingObservations": n,
        "facts": FACTS,
        "iterations": ITERATIONS[n],
        "consolidationMs": {
            "p50": round(p50, 3),
            "p99": round(p99, 3),
            "mean": round(statistics.fmean(consolidation_ms), 3),
        },
        "floorMs": {"p50": round(f50, 3), "p99": round(f99, 3)},
        "ratioToFloor": {"p50": round(p50 / f50, 2), "p99": round(p99 / f99, 2)},
        "ioFloorMs": {"p50": round(io50, 3), "p99": round(io99, 3)},
        "ratioToIoFloor": {"p50": round(p50 / io50, 2), "p99": round(p99 / io99, 2)},
        "naiveFloorMs": {"p50": round(pct(naive_ms, 0.5), 3), "p99": round(pct(naive_ms, 0.99), 3)},
        "ratioToNaiveFloor": {
            "p50": round(p50 / pct(naive_ms, 0.5), 2),
            "p99": round(p99 / pct(naive_ms, 0.99), 2),
        },
        "writeFloorMs": {"p50": round(pct(write_ms, 0.5), 3), "p99": round(pct(write_ms, 0.99), 3)},
        "twoRoundTripFloorMs": {
            "p50": round(f50 + pct(write_ms, 0.5), 3),
            "note": "floor + writeFloor: reading, then writing the round's payload (no CPU)",
        },
        "breakdownMsP50": {
            "readRound": round(pct(read_ms, 0.5), 3),
            "commitRound": round(pct(commit_ms, 0.5), 3),
            "planAndRank": round(
                pct(
                    [
                        t - r - c
                        for t, r, c in zip(consolidation_ms, read_ms, commit_ms, strict=True)
                    ],
                    0.5,
                ),
                3,
            ),
            "decodeFactsOnly": round(pct(decode_ms, 0.5), 3),
            "note": "readRound/commitRound: wall time of each round trip including its Python "
            "decoding/encoding; decodeFactsOnly: parsing the stored facts into Fact objects, "
            "measured alone",
        },
        "stagedCommit": staged,
        "roundTrips": sorted(round_trips),
        "serverCommandsInclScriptCalls": sorted(commands),
    }


def redis_benchmark_csv(url: str, *args: str, timeout: int) -> list[list[str]] | None:
    """The CSV rows (unquoted cells) ``redis-benchmark ARGS --csv`` prints against the server
    at ``url``; None where the tool is not installed."""
    exe = shutil.which("redis-benchmark")
    if exe is None:
        return None
    parsed = redis.connection.parse_url(url)  # type: ignore[no-untyped-call]
    host, port = str(parsed.get("host", "127.0.0.1")), str(parsed.get("port", 6379))
    out = subprocess.run(
        [exe, "-h", host, "-p", port, *args, "--csv"],
        capture_output=True,
        text=True,
        timeout=timeout,
        check=False,
    )
    return [line.replace('"', "").split(",") for line in out.stdout.splitlines()]


def redis_benchmark_floor(url: str) -> dict[str, Any] | None:
    rows = redis_benchmark_csv(url, "-c", "1", "-n", "20000", "-t", "ping", timeout=120)
    rows = [row for row in rows or [] if row[0].startswith("PING")]
    if not rows:
        return None
    result: dict[str, Any] = {"client": 1}
    for row in rows:
        rps = float(row[1])
        result[row[0]] = {"requestsPerSecond": rps, "usPerRoundTrip": round(1e6 / rps, 1)}
    return result


def run(results_dir: Path) -> dict[str, Any]:
    with redis_url() as url:
        client = redis.Redis.from_url(url, socket_timeout=30)
        server = client.info("server")
        rows = [measure(client, n) for n in SIZES]
        pingfloor = redis_benchmark_floor(url)
        client.close()
    at_1000 = next(r for r in rows if r["pendingObservations"] == 1_000)
    constant = len({tuple(r["roundTrips"]) for r in rows}) == 1
    lines = [
        f"   {'pending':>8} {'p50 ms':>8} {'p99 ms':>8} {'floor p50':>10} {'ratio p50':>10} "
        f"{'ratio p99':>10} {'round trips':>12} {'io p50':>8} {'io p99':>8} {'naive p50':>10}",
    ]
    for r in rows:
        lines.append(
            f"   {r['pendingObservations']:>8} {r['consolidationMs']['p50']:>8} "
            f"{r['consolidationMs']['p99']:>8} {r['floorMs']['p50']:>10} "
            f"{r['ratioToFloor']['p50']:>10} {r['ratioToFloor']['p99']:>10} "
            f"{','.join(map(str, r['roundTrips'])):>12} {r['ioFloorMs']['p50']:>8} "
            f"{r['ioFloorMs']['p99']:>8} {r['naiveFloorMs']['p50']:>10}"
        )
    targets = {
        "p99UnderMsAt1000": TARGET_P99_MS,
        "p99Met": at_1000["consolidationMs"]["p99"] < TARGET_P99_MS,
        "ratioToFloorAt1000": TARGET_RATIO,
        "ratioMetAtP50": at_1000["ratioToFloor"]["p50"] <= TARGET_RATIO,
        "ratioMetAtP99": at_1000["ratioToFloor"]["p99"] <= TARGET_RATIO,
        "ioFloorRatioMetAtP50": at_1000["ratioToIoFloor"]["p50"] <= TARGET_RATIO,
        "ioFloorRatioMetAtP99": at_1000["ratioToIoFloor"]["p99"] <= TARGET_RATIO,
        "roundTripsConstant": constant,
    }
    b = at_1000["breakdownMsP50"]
    lines.append(
        f"   1,000 pending, p50 breakdown ms: read {b['readRound']} (decode alone "
        f"{b['decodeFactsOnly']}), plan+rank {b['planAndRank']}, commit {b['commitRound']}; "
        f"two-round-trip floor {at_1000['twoRoundTripFloorMs']['p50']}"
    )
    lines.append(f"   targets: {targets}")
    return {
        "redis": {"version": server.get("redis_version"), "url": url.split("@")[-1]},
        "rows": rows,
        "redisBenchmark": pingfloor,
        "targets": targets,
        "summary": "\n".join(lines),
    }
