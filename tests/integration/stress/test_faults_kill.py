"""Crashes: ``engram serve`` stopped (SIGTERM) or killed (``kill -9``) in the middle of ingest,
and a process killed in the middle of consolidation rounds.

The contract these tests hold the local service to (the same as in AWS, where the 202 is sent
after SQS durably accepted every record and SQS redelivers to a new consumer):

- SIGTERM / Ctrl-C drains: every observation that got a 202 is in Redis after the exit.
- ``kill -9``: the local SQS stand-in is durable (``<data_dir>/queues/*.sqlite3``, each send
  committed before the 202), so every observation that got a 202 before the kill — queued, or
  in flight in the consumer — is stored exactly once after ``engram serve`` restarts, with no
  help from the client. A client that also retries its requests (same observation ids) adds
  nothing.
- A crash between consolidation rounds or inside one never double-counts (facts and the
  checkpoint commit atomically — the crash between facts and checkpoint is covered by
  ``tests/integration/behaviour``); here a consolidating process is killed repeatedly while
  observations keep arriving, and afterwards nothing is lost, pending or counted twice.
"""

from __future__ import annotations

import contextlib
import os
import random
import signal
import sqlite3
import subprocess
import sys
import threading
import time
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import httpx
import pytest
import redis
from tests.integration.stress.conftest import assert_exactly_once, eventually, ledger
from tests.support.faultproxy import FaultProxy
from tests.support.rounds import one_round
from tests.support.services import RedisServer, RedisTarget, free_port

from engram.adapters.redis_behaviour import RedisBehaviourStore
from engram.behaviour.models import parse_observations
from engram.local.app import INGEST_QUEUE
from engram.local.sqs import queue_path
from engram.local.tokens import TokenSigner
from engram.settings import Settings
from engram.use_cases.ingest_messages import decode_message

REPO = Path(__file__).resolve().parents[3]
IDENTITY = "acme:alice"


class Serve:
    """``engram serve`` as a subprocess on a fixed port and data dir (restartable)."""

    def __init__(self, redis_url: str, database_url: str, data_dir: Path) -> None:
        self.port = free_port()
        self.url = f"http://127.0.0.1:{self.port}"
        self.data_dir = data_dir
        self.log = data_dir / "serve.log"
        env = {k: v for k, v in os.environ.items() if not k.startswith("ENGRAM_")}
        env.update(
            {
                "ENGRAM_DATA_DIR": str(data_dir),
                "ENGRAM_PORT": str(self.port),
                "REDIS_URL": redis_url,
                "ENGRAM_DATABASE_URL": database_url,
                "ENGRAM_MAINTENANCE_INTERVAL_S": "3600",
                "ENGRAM_OBSERVATIONS_PER_MINUTE": "100000",  # the replays are not throttled
                "ENGRAM_LOG_LEVEL": "WARNING",
                "POWERTOOLS_METRICS_DISABLED": "true",
                "POWERTOOLS_TRACE_DISABLED": "true",
                "POWERTOOLS_LOG_LEVEL": "WARNING",
                "PYTHONPATH": os.pathsep.join([str(REPO / "shared"), str(REPO)]),
                "PYTHONUNBUFFERED": "1",
            }
        )
        self.env = env
        self.proc: subprocess.Popen[bytes] | None = None
        settings = Settings(data_dir=data_dir)
        self.token = TokenSigner(data_dir, audience=settings.local_audience).issue("alice", "acme")

    def start(self) -> None:
        with self.log.open("ab") as log:
            self.proc = subprocess.Popen(
                [sys.executable, "-m", "functions.local", "serve", "--port", str(self.port)],
                cwd=REPO,
                env=self.env,
                stdout=log,
                stderr=subprocess.STDOUT,
            )
        deadline = time.monotonic() + 60
        while time.monotonic() < deadline:
            assert self.proc.poll() is None, self.log.read_text()[-3000:]
            with contextlib.suppress(httpx.HTTPError):
                if httpx.get(f"{self.url}/v1/health", timeout=2).status_code == 200:
                    return
            time.sleep(0.1)
        raise AssertionError("engram serve did not come up:\n" + self.log.read_text()[-3000:])

    def signal(self, sig: int) -> int:
        assert self.proc is not None
        self.proc.send_signal(sig)
        code = self.proc.wait(timeout=60)
        self.proc = None
        return code

    def stop(self) -> None:
        if self.proc is not None and self.proc.poll() is None:
            self.proc.kill()
            self.proc.wait(timeout=10)
        self.proc = None


@pytest.fixture
def serve(
    own_redis: RedisServer, migrated_url: str, tmp_path: Path
) -> Iterator[tuple[Serve, RedisServer]]:
    server = Serve(own_redis.url, migrated_url, tmp_path)
    try:
        yield server, own_redis
    finally:
        server.stop()


def request_body(i: int, per_request: int) -> dict[str, Any]:
    return {
        "observations": [
            {
                "id": f"obs-{i}-{j}",
                "type": "tool_success",
                "content": f"call {i}.{j}",
                "metadata": {"toolName": f"tool{j % 3}", "durationMs": j},
            }
            for j in range(per_request)
        ]
    }


class Ingestor:
    """A client thread posting request after request until stopped; records every 202."""

    def __init__(self, url: str, token: str, per_request: int = 10) -> None:
        self.url = url
        self.token = token
        self.per_request = per_request
        self.accepted: list[str] = []
        self.sent: list[int] = []
        self.stop = threading.Event()
        self.thread = threading.Thread(target=self.run, daemon=True)

    def run(self) -> None:
        headers = {"Authorization": f"Bearer {self.token}"}
        with httpx.Client(base_url=self.url, headers=headers, timeout=5) as http:
            i = 0
            while not self.stop.is_set():
                self.sent.append(i)
                try:
                    res = http.post("/v1/observations", json=request_body(i, self.per_request))
                except httpx.HTTPError:
                    return  # the server went away
                if res.status_code == 202:
                    self.accepted += res.json()["ids"]
                i += 1

    def all_ids(self) -> list[str]:
        return [
            o["id"] for i in self.sent for o in request_body(i, self.per_request)["observations"]
        ]


def replay(url: str, token: str, requests: list[int], per_request: int) -> None:
    with httpx.Client(base_url=url, headers={"Authorization": f"Bearer {token}"}) as http:
        for i in requests:
            res = http.post("/v1/observations", json=request_body(i, per_request))
            assert res.status_code == 202, res.text


def stored_ids(client: redis.Redis) -> list[str]:
    return ledger(client, IDENTITY).logged_ids


def test_sigterm_mid_ingest_drains_every_accepted_observation(
    serve: tuple[Serve, RedisServer],
) -> None:
    server, own_redis = serve
    server.start()
    ingestor = Ingestor(server.url, server.token)
    ingestor.thread.start()
    eventually(lambda: len(ingestor.accepted) >= 200, timeout_s=30)
    assert server.signal(signal.SIGTERM) == 0  # drains in-flight requests and the queue
    ingestor.stop.set()
    ingestor.thread.join(10)
    r = redis.Redis.from_url(own_redis.url)
    book = ledger(r, IDENTITY)
    # every 202 is stored, once; a request in flight at the signal may have been processed
    # and drained while its response was cut off: stored too, never twice
    stored = book.logged_ids
    assert len(stored) == len(set(stored)), "an observation was stored twice"
    assert set(ingestor.accepted) <= set(stored)
    assert set(stored) <= set(ingestor.all_ids())
    assert len(set(stored) - set(ingestor.accepted)) <= ingestor.per_request


def queued_in_file(data_dir: Path) -> set[str]:
    """Ids of the observations the dead server's ingest queue file holds (queued, delayed or
    in flight)."""
    conn = sqlite3.connect(queue_path(data_dir, INGEST_QUEUE))
    try:
        bodies = [row[0] for row in conn.execute("SELECT body FROM messages")]
    finally:
        conn.close()
    return {o.id for body in bodies for o in decode_message(body)[1]}


def test_kill_9_mid_ingest_loses_nothing_that_got_a_202(
    own_redis: RedisServer, migrated_url: str, tmp_path: Path
) -> None:
    with FaultProxy.for_redis_url(own_redis.url) as proxy:
        # Redis slow, then unreachable, behind the proxy: the consumer lags, then fails and
        # retries, so at the kill the queue holds a backlog and records in flight
        proxy.latency(5)
        server = Serve(proxy.url_for_redis(), migrated_url, tmp_path)
        try:
            server.start()
            ingestor = Ingestor(server.url, server.token)
            ingestor.thread.start()
            eventually(lambda: len(ingestor.accepted) >= 200, timeout_s=30)
            proxy.down()
            reached = len(ingestor.accepted) + 100
            eventually(lambda: len(ingestor.accepted) >= reached, timeout_s=30)
            server.signal(signal.SIGKILL)
            ingestor.stop.set()
            ingestor.thread.join(10)

            r = redis.Redis.from_url(own_redis.url)
            after_crash = stored_ids(r)
            assert len(after_crash) == len(set(after_crash)), "an observation was stored twice"
            backlog = set(ingestor.accepted) - set(after_crash)
            assert len(backlog) >= 100  # accepted while Redis was down: only on disk
            assert backlog <= queued_in_file(tmp_path)  # each one on disk, in its message

            # restart with Redis back: the queue file is redelivered, nobody replays anything
            proxy.pass_through()
            server.start()
            eventually(lambda: set(ingestor.accepted) <= set(stored_ids(r)), timeout_s=60)
            assert server.signal(signal.SIGTERM) == 0
            stored = stored_ids(r)
            assert len(stored) == len(set(stored)), "an observation was stored twice"
            assert set(ingestor.accepted) <= set(stored)
            assert set(stored) <= set(ingestor.all_ids())
            # beyond the 202s: at most the one request whose response the kill cut off
            assert len(set(stored) - set(ingestor.accepted)) <= ingestor.per_request
            assert queued_in_file(tmp_path) == set()

            # a client that retries every request anyway (same ids) adds nothing
            server.start()
            replay(server.url, server.token, ingestor.sent, ingestor.per_request)
            expected = ingestor.all_ids()
            eventually(lambda: len(stored_ids(r)) >= len(expected), timeout_s=30)
            assert server.signal(signal.SIGTERM) == 0
            assert_exactly_once(ledger(r, IDENTITY), expected)
        finally:
            server.stop()


CONSOLIDATOR = r"""
import sys
from engram import ExponentialDecay, RedisBehaviourStore, consolidate
from engram.adapters.redis_client import make_redis
from engram.settings import Settings
store = RedisBehaviourStore(make_redis(Settings(redis_socket_timeout_ms=5000)))
print("ready", flush=True)
while True:
    consolidate(sys.argv[1], observations=store, facts=store, checkpoints=store.checkpoints,
                decay=ExponentialDecay())
"""


def test_kill_9_mid_consolidation_never_loses_or_double_counts(redis_target: RedisTarget) -> None:
    client = redis_target.client()
    store = RedisBehaviourStore(client)
    env = {k: v for k, v in os.environ.items() if not k.startswith("ENGRAM_")}
    env |= redis_target.env() | {"PYTHONPATH": os.pathsep.join([str(REPO / "shared"), str(REPO)])}
    rng = random.Random(7)
    appended: list[str] = []
    batches = 0
    kills = 0

    def append_batch() -> None:
        nonlocal batches
        items = [
            {
                "id": f"b{batches}-{j}",
                "type": "tool_success",
                "content": "ok",
                "createdAt": int(time.time() * 1000),
                "metadata": {"toolName": "get_account", "durationMs": j},
            }
            for j in range(rng.randint(1, 30))
        ]
        store.append(IDENTITY, parse_observations(items, identity_id=IDENTITY))
        appended.extend(str(i["id"]) for i in items)
        batches += 1

    for _ in range(6):
        proc = subprocess.Popen(
            [sys.executable, "-c", CONSOLIDATOR, IDENTITY],
            cwd=REPO,
            env=env,
            stdout=subprocess.PIPE,
        )
        try:
            assert proc.stdout is not None
            assert proc.stdout.readline().strip() == b"ready"
            for _ in range(rng.randint(3, 10)):
                append_batch()
                time.sleep(rng.uniform(0.0, 0.02))
            proc.send_signal(signal.SIGKILL)  # wherever it is: mid-read, mid-commit, idle
            kills += 1
        finally:
            proc.kill()
            proc.wait(10)

    # one more round by a healthy process consumes whatever was left pending
    one_round(store, identity=IDENTITY)
    book = ledger(client, IDENTITY)
    assert kills == 6
    assert_exactly_once(book, appended)
    assert book.cursor == book.seq == len(appended)  # nothing left pending, nothing skipped
    assert client.hlen(f"engram:pending:{{{IDENTITY}}}") == 0
    (affinity,) = [f for f in book.facts.values() if f["subject"] == "tool_affinity:get_account"]
    # each round reinforces once and a round needs new observations: never more rounds than
    # batches, whatever the kills did
    assert 1 <= affinity["reinforcementCount"] <= batches
    before = dict(book.facts)
    one_round(store, identity=IDENTITY)
    assert ledger(client, IDENTITY).facts == before  # nothing new: nothing re-counted
