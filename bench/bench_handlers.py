"""Lambda handler cold imports and warm ``POST /v1/sessions`` through the local server.

1. **Cold import** of each ``functions/<name>/handler.py``: ``python -X importtime -c "import
   functions.<name>.handler"`` in a fresh process, ``ENGRAM_BENCH_IMPORT_RUNS`` times (default
   7). The process runs without a network: in a new network namespace (``unshare -n``) when
   the machine allows it, and always with every endpoint pointing at a closed local port
   (Redis, PostgreSQL, AWS, proxies), so an import that tried to connect would fail or hang
   instead of passing. Reported per handler: the ``-X importtime`` cumulative time of the
   handler module (median, max), the process wall time (median), the floor (an empty
   ``python -c pass`` in the same conditions) and the packages that cost the most (sum of their
   modules' self times). Target:
   under 300 ms each.
2. **Warm sessions**: ``engram serve`` as a subprocess (embedded PostgreSQL, a private
   redis-server), one user holding 200 facts and 2,000 memories, and 1,000 pending
   observations before every timed request. Memories are saved through the API
   (``POST /v1/memories``); facts and pending observations are appended directly to the
   service's Redis through ``RedisBehaviourStore.append`` (the consumer's own store) so each
   request finds exactly 1,000 pending observations without waiting for the queue. Reported:
   ``POST /v1/sessions`` p50/p90/p99 over ``ENGRAM_BENCH_SESSIONS`` requests (default 200)
   after a warm-up, the same with nothing pending, and the floor: ``GET /v1/tools`` through
   the same server (HTTP + API Gateway emulation + token verification + Lambda dispatch, no
   store); ``GET /v1/health`` (one Redis and one PostgreSQL ping) is reported beside it.
   Each timed session's Redis work is read from the server (``INFO commandstats`` and
   ``stats``: commands, a script's own included, and bytes).
3. **Cost per million session starts** (``bench.cost_model``): from this run's p50s and Redis
   work, the prod stage's memory size and docs/deployment.md's price table.

Run alone: ``python -m bench handlers``.
"""

from __future__ import annotations

import contextlib
import http.client
import json
import os
import re
import shutil
import statistics
import subprocess
import sys
import time
import uuid
from collections.abc import Iterator
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path
from typing import Any
from urllib.parse import urlsplit

import httpx

REPO = Path(__file__).resolve().parents[1]
HANDLERS = ("ingest", "ingest_consumer", "session", "memories")
TARGET_IMPORT_MS = 300.0
PENDING = 1_000
FACTS = 200
MEMORIES = 2_000
NOWHERE = "127.0.0.1:9"  # the discard port: nothing listens there

_IMPORT_LINE = re.compile(r"^import time:\s+(\d+)\s+\|\s+(\d+)\s+\|(\s*)(\S+)")


# --- 1. cold imports ----------------------------------------------------------------------
def _offline_env() -> dict[str, str]:
    env = {
        k: v
        for k, v in os.environ.items()
        if not k.startswith(("ENGRAM_", "AWS_", "POWERTOOLS_")) and k != "REDIS_URL"
    }
    env.update(
        {
            "PYTHONPATH": os.pathsep.join([str(REPO / "shared"), str(REPO)]),
            "PYTHONDONTWRITEBYTECODE": "1",
            "ENGRAM_REDIS_URL": f"redis://{NOWHERE}/0",
            "ENGRAM_DATABASE_URL": f"postgresql://engram@{NOWHERE}/engram",
            "ENGRAM_INGEST_QUEUE_URL": f"http://{NOWHERE}/000000000000/engram-ingest",
            "ENGRAM_EXTRACTION_QUEUE_URL": f"http://{NOWHERE}/000000000000/engram-extraction",
            "AWS_ENDPOINT_URL": f"http://{NOWHERE}",
            "AWS_REGION": "us-east-1",
            "AWS_DEFAULT_REGION": "us-east-1",
            "AWS_ACCESS_KEY_ID": "bench",
            "AWS_SECRET_ACCESS_KEY": "bench",
            "AWS_EC2_METADATA_DISABLED": "true",
            "HTTP_PROXY": f"http://{NOWHERE}",
            "HTTPS_PROXY": f"http://{NOWHERE}",
            "NO_PROXY": "",
        }
    )
    return env


def _unshare_prefix() -> list[str]:
    exe = shutil.which("unshare")
    if exe is None:
        return []
    try:
        proc = subprocess.run([exe, "-n", "true"], capture_output=True, timeout=10, check=False)
        ok = proc.returncode == 0
    except (OSError, subprocess.SubprocessError):
        ok = False
    return [exe, "-n"] if ok else []


def _parse_importtime(stderr: str, module: str) -> tuple[float | None, list[tuple[str, float]]]:
    """(cumulative ms of ``module``, distributions by the self time of their modules)."""
    target: float | None = None
    by_package: dict[str, float] = {}
    for line in stderr.splitlines():
        m = _IMPORT_LINE.match(line)
        if not m:
            continue
        name = m.group(4)
        if name == module:
            target = int(m.group(2)) / 1000
        root = name.split(".")[0]
        by_package[root] = by_package.get(root, 0.0) + int(m.group(1)) / 1000
    return target, sorted(by_package.items(), key=lambda kv: -kv[1])


def _import_once(prefix: list[str], code: str, env: dict[str, str]) -> tuple[float, str]:
    started = time.perf_counter()
    proc = subprocess.run(
        [*prefix, sys.executable, "-X", "importtime", "-c", code],
        cwd=REPO,
        env=env,
        capture_output=True,
        text=True,
        timeout=120,
        check=False,
    )
    wall_ms = (time.perf_counter() - started) * 1000
    if proc.returncode != 0:
        raise RuntimeError(f"{code!r} failed offline:\n{proc.stderr[-3000:]}")
    return wall_ms, proc.stderr


def bench_imports(runs: int) -> dict[str, Any]:
    prefix = _unshare_prefix()
    env = _offline_env()
    floor_walls = [_import_once(prefix, "pass", env)[0] for _ in range(runs)]
    handlers: dict[str, Any] = {}
    for name in HANDLERS:
        module = f"functions.{name}.handler"
        cumulative: list[float] = []
        walls: list[float] = []
        heaviest: list[tuple[str, float]] = []
        for _ in range(runs):
            wall, stderr = _import_once(prefix, f"import {module}", env)
            ms, heaviest = _parse_importtime(stderr, module)
            if ms is None:
                raise RuntimeError(f"no importtime line for {module}")
            cumulative.append(ms)
            walls.append(wall)
        median = statistics.median(cumulative)
        handlers[name] = {
            "importMsMedian": round(median, 1),
            "importMsMax": round(max(cumulative), 1),
            "processWallMsMedian": round(statistics.median(walls), 1),
            "underTarget": median < TARGET_IMPORT_MS,
            "heaviestPackagesSelfMs": {k: round(v, 1) for k, v in heaviest[:8]},
        }
    return {
        "runs": runs,
        "networkNamespace": bool(prefix),
        "targetMs": TARGET_IMPORT_MS,
        "floorEmptyInterpreterWallMsMedian": round(statistics.median(floor_walls), 1),
        "handlers": handlers,
    }


# --- 2. warm sessions ---------------------------------------------------------------------
@contextlib.contextmanager
def _redis_base() -> Iterator[tuple[str, str]]:
    """The service's Redis URL and an administrator's (``INFO`` is not the service's)."""
    if os.environ.get("REDIS_URL"):
        yield os.environ["REDIS_URL"], os.environ["REDIS_URL"]
        return
    from tests.support.services import redis_server

    with redis_server() as server:
        yield server.url, server.admin_url


def _percentiles(samples_ms: list[float]) -> dict[str, float]:
    ordered = sorted(samples_ms)

    def pct(p: float) -> float:
        return round(ordered[min(len(ordered) - 1, round(p / 100 * (len(ordered) - 1)))], 2)

    return {
        "n": len(ordered),
        "p50Ms": pct(50),
        "p90Ms": pct(90),
        "p99Ms": pct(99),
        "maxMs": round(ordered[-1], 2),
        "meanMs": round(statistics.fmean(ordered), 2),
    }


def _observations(identity: str, count: int, now_ms: int, salt: str) -> list[Any]:
    """``count`` observations over the user's 200 fact subjects (tools, entities, domains)."""
    from engram.behaviour.models import Observation, ObservationType

    out = []
    for i in range(count):
        slot = i % FACTS
        if slot < 40:
            tool = f"tool_{slot}"
            kind, content = ObservationType.TOOL_SUCCESS, f"{tool} ok"
            metadata: dict[str, Any] = {"toolName": tool, "durationMs": 50}
        elif slot < 190:
            entity = f"ACC-{slot}"
            kind, content = ObservationType.ENTITY_ACCESS, f"opened {entity}"
            metadata = {"entityType": "account", "entityId": entity, "entityName": entity}
        else:
            domain = f"domain{slot}"
            kind, content = ObservationType.QUERY_PATTERN, f"about {domain}"
            metadata = {"domain": domain, "query": content}
        out.append(
            Observation(
                id=f"{salt}-{i}",
                identity_id=identity,
                type=kind,
                content=content,
                metadata=metadata,
                created_at=now_ms,
            )
        )
    return out


def bench_sessions(requests: int, warmup: int) -> dict[str, Any]:
    import redis
    from tests.e2e.harness import run_local_service

    from engram.adapters.redis_behaviour import RedisBehaviourStore

    with (
        _redis_base() as (base, admin_url),
        run_local_service(base, extra_env={"ENGRAM_MAINTENANCE_INTERVAL_S": "3600"}) as svc,
    ):
        tenant = svc.tenant()
        identity = tenant.identity
        token = svc.token(tenant.user, tenant.team)
        headers = {"Authorization": f"Bearer {token}"}
        client = redis.Redis.from_url(svc.redis_url)
        store = RedisBehaviourStore(client, prefix=svc.key_prefix)

        # 2,000 memories through the API
        def save(i: int) -> int:
            with httpx.Client(base_url=svc.url, timeout=30) as api:
                body = {"key": f"note_{i:04d}", "value": f"memory {i} about topic {i % 37}"}
                return api.post("/v1/memories", json=body, headers=headers).status_code

        seeded = time.perf_counter()
        with ThreadPoolExecutor(max_workers=4) as pool:
            statuses = list(pool.map(save, range(MEMORIES)))
        if statuses.count(201) != MEMORIES:
            raise RuntimeError(f"seeding memories: {sorted(set(statuses))}")
        memories_s = time.perf_counter() - seeded

        keep_alive = _KeepAlive(svc.url)
        fresh = _FreshConnection(svc.url)
        now_ms = int(time.time() * 1000)
        # 200 facts: one consolidation of observations over 200 subjects
        store.append(identity, _observations(identity, FACTS, now_ms, "seed"))
        _, first = keep_alive.send("POST", "/v1/sessions", headers, {})
        if len(first["facts"]) != FACTS or first["degraded"]:
            raise RuntimeError(f"seeding facts: {len(first['facts'])} facts, {first['degraded']}")
        rounds = iter(range(1_000_000))

        admin = redis.Redis.from_url(admin_url)
        snapshot_overhead = _redis_work(admin, _redis_work(admin))

        def timed_sessions(sender: _Sender, n: int, pending: int) -> dict[str, Any]:
            samples: list[float] = []
            degraded = 0
            facts = 0
            commands = moved = 0.0
            for _ in range(n):
                if pending:
                    salt = uuid.uuid4().hex[:8]
                    batch = _observations(identity, pending, now_ms + next(rounds), salt)
                    store.append(identity, batch)
                before = _redis_work(admin)
                started = time.perf_counter()
                status, body = sender.send("POST", "/v1/sessions", headers, {})
                samples.append((time.perf_counter() - started) * 1000)
                work = _redis_work(admin, before)
                commands += work[0] - snapshot_overhead[0]
                moved += work[1] - snapshot_overhead[1]
                if status != 200:
                    raise RuntimeError(f"session answered {status}: {body}")
                degraded += bool(body["degraded"])
                facts = len(body["facts"])
            return {
                **_percentiles(samples),
                "degradedResponses": degraded,
                "factsReturned": facts,
                "redisCommandsPerSession": round(commands / n, 1),
                "redisBytesPerSession": round(moved / n),
            }

        def timed_get(sender: _Sender, path: str, n: int) -> dict[str, Any]:
            samples: list[float] = []
            for _ in range(n):
                started = time.perf_counter()
                status, _body = sender.send("GET", path, headers, None)
                samples.append((time.perf_counter() - started) * 1000)
                if status != 200:
                    raise RuntimeError(f"{path} answered {status}")
            return {"route": f"GET {path}", **_percentiles(samples)}

        results: dict[str, Any] = {}
        for mode, sender in (("newConnection", fresh), ("keepAlive", keep_alive)):
            timed_sessions(sender, warmup, PENDING)
            timed_get(sender, "/v1/tools", warmup)
            results[mode] = {
                "sessionWith1000Pending": timed_sessions(sender, requests, PENDING),
                "sessionNothingPending": timed_sessions(sender, requests, 0),
                "floorAuthenticatedRoute": timed_get(sender, "/v1/tools", requests),
                "health": timed_get(sender, "/v1/health", requests),
            }
            r = results[mode]
            r["p50RatioToFloor"] = round(
                r["sessionWith1000Pending"]["p50Ms"]
                / max(r["floorAuthenticatedRoute"]["p50Ms"], 0.001),
                1,
            )
        _, last = keep_alive.send("POST", "/v1/sessions", headers, {})
        keep_alive.close()
        client.close()
        admin.close()

    return {
        "seed": {
            "memories": MEMORIES,
            "memoriesVia": "POST /v1/memories (4 concurrent clients)",
            "memoriesSeedSeconds": round(memories_s, 1),
            "facts": FACTS,
            "pendingObservationsPerRequest": PENDING,
            "factsAndObservationsVia": "RedisBehaviourStore.append on the service's Redis",
        },
        **results,
        "promptChars": len(last["prompt"]),
        "memoriesInSession": len(last["memories"]),
    }


def _redis_work(client: Any, since: tuple[int, int] | None = None) -> tuple[int, int]:
    """(commands, network bytes) the server has done (``INFO`` excluded), or since ``since``;
    a script's own commands count (``INFO commandstats`` counts them)."""
    commands = sum(
        int(v["calls"]) for k, v in client.info("commandstats").items() if k != "cmdstat_info"
    )
    stats = client.info("stats")
    moved = int(stats["total_net_input_bytes"]) + int(stats["total_net_output_bytes"])
    if since is None:
        return commands, moved
    return commands - since[0], moved - since[1]


def session_cost(sessions: dict[str, Any]) -> dict[str, Any]:
    """Dollars per million session starts (``bench.cost_model``) from this run: the Lambda's
    duration is the keep-alive session p50 (1,000 pending) less the authenticated floor route
    (HTTP, gateway, token: not the function's time in AWS); PostgreSQL's busy time, at most
    the nothing-pending session less the floor (recall is what that session does)."""
    from bench import cost_model

    k = sessions["keepAlive"]
    pending, idle = k["sessionWith1000Pending"], k["sessionNothingPending"]
    floor = k["floorAuthenticatedRoute"]["p50Ms"]
    moved = pending["redisBytesPerSession"]
    out = cost_model.per_million_sessions(
        session_ms=round(max(pending["p50Ms"] - floor, 0.1), 2),
        postgres_ms=round(max(idle["p50Ms"] - floor, 0.1), 2),
        ecpus_per_session=cost_model.ecpus(pending["redisCommandsPerSession"], moved),
        stage=cost_model.stage_values(),
    )
    out["before"] = "the same: one message per request changes nothing a session start does"
    return out


class _Sender:
    def send(self, method: str, path: str, headers: dict[str, str], body: Any) -> tuple[int, Any]:
        raise NotImplementedError


class _KeepAlive(_Sender):
    """One pooled keep-alive connection, as a chat backend's client holds it."""

    def __init__(self, url: str) -> None:
        self.http = httpx.Client(base_url=url, timeout=30)

    def send(self, method: str, path: str, headers: dict[str, str], body: Any) -> tuple[int, Any]:
        response = self.http.request(method, path, headers=headers, json=body)
        return response.status_code, response.json()

    def close(self) -> None:
        self.http.close()


class _FreshConnection(_Sender):
    """A new loopback TCP connection per request (``http.client``; connect time included)."""

    def __init__(self, url: str) -> None:
        parts = urlsplit(url)
        self.host, self.port = parts.hostname or "127.0.0.1", parts.port or 80

    def send(self, method: str, path: str, headers: dict[str, str], body: Any) -> tuple[int, Any]:
        conn = http.client.HTTPConnection(self.host, self.port, timeout=30)
        try:
            payload = None if body is None else json.dumps(body).encode()
            h = dict(headers)
            if payload is not None:
                h["Content-Type"] = "application/json"
            conn.request(method, path, body=payload, headers=h)
            response = conn.getresponse()
            return response.status, json.loads(response.read() or b"null")
        finally:
            conn.close()


def run(results_dir: Path) -> dict[str, Any]:
    runs = int(os.environ.get("ENGRAM_BENCH_IMPORT_RUNS", "7"))
    requests = int(os.environ.get("ENGRAM_BENCH_SESSIONS", "200"))
    warmup = max(5, requests // 10)
    imports = bench_imports(runs)
    sessions = bench_sessions(requests, warmup)
    worst = max(imports["handlers"].items(), key=lambda kv: kv[1]["importMsMedian"])
    s = sessions["newConnection"]["sessionWith1000Pending"]
    k = sessions["keepAlive"]["sessionWith1000Pending"]
    summary = (
        "   cold import (median, -X importtime): "
        + ", ".join(f"{k} {v['importMsMedian']} ms" for k, v in imports["handlers"].items())
        + f"; worst {worst[0]} vs target {TARGET_IMPORT_MS:.0f} ms\n"
        f"   POST /v1/sessions, 1,000 pending + 200 facts + 2,000 memories: "
        f"p50 {s['p50Ms']} ms, p99 {s['p99Ms']} ms ({s['degradedResponses']} degraded) on new "
        f"connections, floor GET /v1/tools p50 "
        f"{sessions['newConnection']['floorAuthenticatedRoute']['p50Ms']} ms; keep-alive p50 "
        f"{k['p50Ms']} ms, p99 {k['p99Ms']} ms"
    )
    cost = session_cost(sessions)
    summary += (
        f"\n   cost per million session starts (prices of {cost['priceTableDate']}, before = "
        f"after): ${cost['total']:.2f} ({cost['dollars']})"
    )
    return {
        "imports": imports,
        "sessions": sessions,
        "costPerMillionSessions": cost,
        "summary": summary,
    }


if __name__ == "__main__":
    print(json.dumps(run(REPO / "bench" / "results"), indent=2))
