"""The durable local queue (``LocalQueue(path=...)``): what a send accepted survives ``kill -9``,
a batch in flight when the process dies is redelivered by the next one, receive counts, delays
and dead letters survive a restart, and ``engram serve``'s app uses it by default.

The crashes are real: a child process is killed with SIGKILL (by the parent, or by itself from
inside the consumer, between receive and delete)."""

from __future__ import annotations

import json
import os
import sqlite3
import subprocess
import sys
from pathlib import Path
from typing import Any

import pytest
from functions.local import handlers

from engram.local.app import EXTRACTION_QUEUE, INGEST_QUEUE, build_app
from engram.local.pullqueue import PullQueue
from engram.local.sqs import LocalQueue, queue_path
from engram.settings import Settings

REPO = Path(__file__).resolve().parents[3]

CHILD = r"""
import json, os, signal, sys, time
from engram.local.pullqueue import PullQueue
from engram.local.sqs import LocalQueue

path, mode = sys.argv[1], sys.argv[2]
if mode == "send":
    q = LocalQueue("q", path=path)
    for i in range(0, 25, 5):
        q.send_message_batch([{"Id": str(j), "MessageBody": f"m{i + j}"} for j in range(5)])
    print("sent", flush=True)
    time.sleep(60)  # killed here: nothing was consumed, nothing flushed on exit
elif mode == "consume":
    def consumer(event, context):
        print(json.dumps([r["body"] for r in event["Records"]]), flush=True)
        os.kill(os.getpid(), signal.SIGKILL)  # dies between receive and delete
    LocalQueue("q", consumer, path=path, batch_size=3).process_once()
elif mode == "pull":
    q = PullQueue("q", path=path, visibility_timeout_s=300)
    print(json.dumps([m.body for m in q.receive(2)]), flush=True)
    os.kill(os.getpid(), signal.SIGKILL)
"""


def child(path: Path, mode: str) -> subprocess.Popen[str]:
    env = {**os.environ, "PYTHONPATH": os.pathsep.join([str(REPO / "shared"), str(REPO)])}
    return subprocess.Popen(
        [sys.executable, "-c", CHILD, str(path), mode],
        env=env,
        stdout=subprocess.PIPE,
        text=True,
    )


class Recorder:
    def __init__(self) -> None:
        self.records: list[dict[str, Any]] = []

    def __call__(self, event: dict[str, Any], context: Any) -> None:
        self.records.extend(event["Records"])

    def bodies(self) -> list[str]:
        return sorted(r["body"] for r in self.records)

    def counts(self) -> dict[str, str]:
        return {r["body"]: r["attributes"]["ApproximateReceiveCount"] for r in self.records}


def deliver_all(q: LocalQueue) -> None:
    while q.process_once():
        pass


def send(q: LocalQueue, *bodies: str, **extra: Any) -> None:
    q.send_message_batch([{"Id": str(i), "MessageBody": b, **extra} for i, b in enumerate(bodies)])


def test_accepted_sends_survive_kill_9_of_the_sender(tmp_path: Path) -> None:
    path = tmp_path / "q.sqlite3"
    proc = child(path, "send")
    assert proc.stdout is not None
    assert proc.stdout.readline().strip() == "sent"
    proc.kill()
    proc.wait(10)

    rec = Recorder()
    q = LocalQueue("q", rec, path=path)
    assert q.pending() == 25
    deliver_all(q)
    assert rec.bodies() == sorted(f"m{i}" for i in range(25))
    assert set(rec.counts().values()) == {"1"}
    assert q.pending() == 0
    q.close()


def test_a_batch_in_flight_when_the_consumer_dies_is_redelivered(tmp_path: Path) -> None:
    path = tmp_path / "q.sqlite3"
    sender = LocalQueue("q", path=path)
    send(sender, "a", "b", "c", "d", "e")
    sender.close()

    proc = child(path, "consume")
    out, _ = proc.communicate(timeout=60)
    assert proc.returncode == -9
    crashed = json.loads(out.strip())
    assert crashed == ["a", "b", "c"]  # received, never deleted

    rec = Recorder()
    q = LocalQueue("q", rec, path=path)
    deliver_all(q)  # visible at once: no wait for a visibility timeout
    assert rec.bodies() == ["a", "b", "c", "d", "e"]
    assert rec.counts() == {"a": "2", "b": "2", "c": "2", "d": "1", "e": "1"}
    assert q.pending() == 0
    assert q.dead_letters == []
    q.close()


def test_pulled_messages_in_flight_at_a_crash_come_back_on_reopen(tmp_path: Path) -> None:
    path = tmp_path / "x.sqlite3"
    sender = PullQueue("q", path=path)
    send(sender, "t1", "t2", "t3")
    sender.close()

    proc = child(path, "pull")
    out, _ = proc.communicate(timeout=60)
    assert proc.returncode == -9
    assert json.loads(out.strip()) == ["t1", "t2"]

    q = PullQueue("q", path=path, visibility_timeout_s=300)
    got = q.receive(10)  # not 300 s later: the receiver that held them is gone
    assert [(m.body, m.receive_count) for m in got] == [("t1", 2), ("t2", 2), ("t3", 1)]
    for m in got:
        q.delete(m.receipt)
    assert q.pending() == 0
    q.close()


def test_receive_counts_dead_letters_and_delays_survive_a_restart(tmp_path: Path) -> None:
    path = tmp_path / "q.sqlite3"

    def failing(event: dict[str, Any], context: Any) -> dict[str, Any]:
        return {"batchItemFailures": [{"itemIdentifier": r["messageId"]} for r in event["Records"]]}

    first = LocalQueue("q", failing, path=path, visibility_timeout_s=0, max_receive_count=3)
    send(first, "poison")
    send(first, "later", DelaySeconds=3600)
    assert first.process_once() == 1  # receive 1 of "poison"; "later" is delayed
    assert first.process_once() == 1  # receive 2
    first.close()

    second = LocalQueue("q", failing, path=path, visibility_timeout_s=0, max_receive_count=3)
    assert second.process_once() == 1  # receive 3: dead-lettered
    assert second.process_once() == 0  # "later" is still delayed after the restart
    assert second.pending() == 1
    second.close()

    third = LocalQueue("q", path=path)
    (dead,) = third.dead_letters
    assert (dead["body"], dead["attributes"]["ApproximateReceiveCount"]) == ("poison", "3")
    assert [(m.body, m.receive_count) for m in third.messages()] == [("later", 0)]
    third.close()


def test_duplicates_are_persisted_and_redelivered_with_one_message_id(tmp_path: Path) -> None:
    path = tmp_path / "q.sqlite3"
    first = LocalQueue("q", path=path)
    first.duplicate_next(1)
    send(first, "obs-1")  # delivered twice, as SQS at-least-once may
    send(first, "obs-1")  # the client sent the same observation again: a second message
    first.close()

    rec = Recorder()
    second = LocalQueue("q", rec, path=path)
    deliver_all(second)
    assert rec.bodies() == ["obs-1", "obs-1", "obs-1"]
    ids = [r["messageId"] for r in rec.records]
    assert ids[0] == ids[1] != ids[2]
    second.close()


def test_stale_receipts_are_refused_after_a_restart(tmp_path: Path) -> None:
    path = tmp_path / "x.sqlite3"
    q = PullQueue("q", path=path)
    send(q, "t")
    (m,) = q.receive(1)
    q.close()
    again = PullQueue("q", path=path)
    (m2,) = again.receive(1)
    assert m2.receive_count == 2
    with pytest.raises(Exception, match="ReceiptHandleIsInvalid"):
        again.delete(m.receipt)
    again.delete(m2.receipt)
    assert again.pending() == 0
    again.close()


def test_the_queue_file_is_wal_and_fully_synchronous(tmp_path: Path) -> None:
    path = tmp_path / "q.sqlite3"
    q = LocalQueue("q", path=path)
    assert not path.exists()  # opened lazily
    send(q, "a")
    conn = sqlite3.connect(path)
    try:
        assert conn.execute("PRAGMA journal_mode").fetchone() == ("wal",)
        assert conn.execute("SELECT body FROM messages").fetchall() == [("a",)]
    finally:
        conn.close()
    assert q.store.db().execute("PRAGMA synchronous").fetchone() == (2,)  # FULL
    q.close()


def test_engram_serve_app_queues_are_durable_under_the_data_dir(tmp_path: Path) -> None:
    settings = Settings(data_dir=tmp_path)
    app = build_app(settings, handlers=handlers(), run_maintenance=False)
    assert app.ingest_queue is not None
    assert app.extraction_queue is not None
    assert app.sqs
    assert app.ingest_queue.path == queue_path(tmp_path, INGEST_QUEUE)
    assert app.extraction_queue.path == queue_path(tmp_path, EXTRACTION_QUEUE)
    assert app.ingest_queue.max_receive_count == 5
    assert not (tmp_path / "queues").exists()  # nothing opened by building the app
    app.sqs.send_message_batch(app.ingest_queue.url, [{"Id": "1", "MessageBody": "x"}])
    app.sqs.send_message_batch(app.extraction_queue.url, [{"Id": "1", "MessageBody": "y"}])
    app.sqs.close()

    again = build_app(settings, handlers=handlers(), run_maintenance=False)
    assert again.ingest_queue is not None
    assert again.extraction_queue is not None
    assert [m.body for m in again.ingest_queue.messages()] == ["x"]
    assert [m.body for m in again.extraction_queue.messages()] == ["y"]
    assert again.sqs is not None
    again.sqs.close()

    memory = build_app(settings, handlers=handlers(), run_maintenance=False, durable_queues=False)
    assert memory.ingest_queue is not None
    assert memory.ingest_queue.path is None
    assert memory.ingest_queue.pending() == 0


def test_an_ingest_request_is_one_send_and_one_commit_on_disk(tmp_path: Path) -> None:
    from engram.adapters.sqs import SqsSender
    from engram.api.models import ObservationsRequest
    from engram.identity import Caller
    from engram.local.sqs import LocalSqs
    from engram.use_cases.ingest import IngestService

    path = tmp_path / "ingest.sqlite3"
    queue = LocalQueue("ingest", path=path)
    sqs = LocalSqs()
    sqs.add_queue(queue)
    statements: list[str] = []
    queue.store.db().set_trace_callback(statements.append)
    calls: list[int] = []
    send = sqs.send_message_batch

    def counted(QueueUrl: str, Entries: Any) -> dict[str, Any]:  # noqa: N803
        calls.append(len(Entries))
        return send(QueueUrl, Entries)

    sqs.send_message_batch = counted  # type: ignore[method-assign]
    ingest = IngestService(
        SqsSender(sqs, queue.url), observation_retention_days=30, retry_window_s=600
    )
    item = {"type": "tool_success", "content": "ok", "metadata": {"toolName": "t", "durationMs": 1}}
    request = ObservationsRequest.model_validate({"observations": [item] * 100})
    accepted = ingest.accept_observations(
        Caller(user_id="alice", team_id="acme"), request.command()
    )
    assert calls == [1]  # one queue call carrying one message
    assert statements.count("COMMIT") == 1  # one commit, before the 202
    queue.store.close()  # as if killed: what was committed is on disk
    again = LocalQueue("ingest", path=path)
    [message] = again.messages()
    assert [o["id"] for o in json.loads(message.body)["observations"]] == accepted.ids
