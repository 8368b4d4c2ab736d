"""An in-process stand-in for SQS + the Lambda event source mapping, durable on disk.

``LocalSqs`` looks like the slice of a boto3 SQS client the ingest side uses
(``send_message_batch(QueueUrl=..., Entries=[{"Id", "MessageBody", ...}])`` returning
``{"Successful": [...], "Failed": [...]}``, plus ``send_message`` and ``get_queue_url``), so
the SQS adapter can be handed either. Each queue has a worker thread that invokes its consumer
handler with SQS-shaped events (``Records`` with ``messageId``, ``receiptHandle``, ``body``,
``attributes.ApproximateReceiveCount``, ``eventSourceARN``...) in batches, exactly as Lambda
does:

* a response ``{"batchItemFailures": [{"itemIdentifier": messageId}]}`` redelivers only those
  records, after a visibility timeout that grows with each receive (``retry_delay_s``:
  ``visibility_timeout_s`` x ``backoff_factor`` ** (receives - 1), capped at
  ``max_visibility_timeout_s``); a handler that raises fails the whole batch;
* a record that failed ``max_receive_count`` times (5, as the AWS redrive policy) moves to the
  queue's ``dead_letters``; with the defaults (1 s doubling) the fifth receive comes ~15 s
  after the first, so a Redis outage of ~10 s dead-letters nothing;
* ``drain(timeout)`` waits until nothing is queued, delayed or in flight.

Durability (``path=``): the queue's messages, receive counts, visibility deadlines and dead
letters live in one SQLite file (``engram.local.queue_store``: WAL journal,
``synchronous=FULL``). ``send_message_batch`` commits once, before it returns, so a success (and
the 202 built on it: one commit per ingest request) means the record is on disk and survives
``kill -9`` of the process, like a record SQS accepted. Every receive, delete, retry and
dead-letter is a committed transaction too. When a queue file is opened, messages
that were in flight (received, neither deleted nor released) become visible at once: the
process that held them is gone, so they are redelivered (at-least-once; the consumers are
idempotent by observation id). Without ``path`` the same code runs on a private in-memory
SQLite database (for tests), lost with the process. The file opens lazily, at first use.

For fault tests: ``duplicate_next(n)`` delivers the next ``n`` sent messages twice (same
``messageId``, as SQS at-least-once delivery does), ``out_of_order=True`` picks visible
messages in random order, ``fail_sends`` makes chosen entries fail (``Failed`` in the
response) and ``send_error`` makes the whole call raise.
"""

from __future__ import annotations

import contextlib
import hashlib
import logging
import random
import threading
import time
import uuid
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from engram import limits
from engram.local.lambda_context import FakeLambdaContext
from engram.local.queue_store import Message, QueueStore, Synchronous, now_ms

_log = logging.getLogger("engram.local.sqs")

ACCOUNT = "000000000000"
MAX_BATCH_ENTRIES = 10
#: A queue's maximum message size unless given (SQS's default; one batch may carry as much).
DEFAULT_MAX_MESSAGE_BYTES = limits.DEFAULT_QUEUE_MESSAGE_BYTES
#: Deliveries before a record is dead-lettered (the AWS redrive policy's maxReceiveCount).
DEFAULT_MAX_RECEIVE_COUNT = 5
#: How long a batch handed to the in-process consumer stays hidden from other receivers.
PUSH_IN_FLIGHT_S = 900.0
QUEUE_DIR = "queues"

Consumer = Callable[[dict[str, Any], Any], Any]


class LocalSqsError(Exception):
    """Raised like botocore's ClientError for a request SQS would reject; ``code`` says why."""

    def __init__(self, code: str, message: str) -> None:
        super().__init__(f"{code}: {message}")
        self.code = code
        self.message = message


@dataclass
class QueueStats:
    """Counters of this process (not persisted)."""

    sent: int = 0
    delivered: int = 0
    succeeded: int = 0
    failed: int = 0
    dead_lettered: int = 0


def _size(body: Any) -> int:
    return len(str(body or "").encode("utf-8"))


def _failure(
    entry: Mapping[str, Any], code: str, message: str, *, sender: bool = True
) -> dict[str, Any]:
    return {"Id": entry["Id"], "SenderFault": sender, "Code": code, "Message": message}


def _md5(text: str) -> str:
    return hashlib.md5(text.encode("utf-8"), usedforsecurity=False).hexdigest()


def queue_path(data_dir: Path | str, name: str) -> Path:
    """Where the durable queue ``name`` of a local service lives: ``<data_dir>/queues/``."""
    return Path(data_dir) / QUEUE_DIR / f"{name}.sqlite3"


class LocalQueue:
    """One queue with its event source mapping to ``consumer``; durable when ``path`` is
    given (see the module docstring).

    ``max_message_bytes`` is the queue's ``MaximumMessageSize`` (also the most one
    ``send_message_batch`` may carry). ``synchronous`` is the SQLite setting of a durable
    queue (FULL: each commit is fsynced;
    NORMAL: survives the process dying, not the machine). ``clock`` (wall-clock epoch
    seconds, default ``time.time``) is for tests; deadlines are stored in it, so a durable
    queue's clock must be the wall clock.
    """

    def __init__(
        self,
        name: str,
        consumer: Consumer | None = None,
        *,
        region: str = "us-east-1",
        batch_size: int = 10,
        batch_window_s: float = 0.0,
        visibility_timeout_s: float = 1.0,
        max_receive_count: int = DEFAULT_MAX_RECEIVE_COUNT,
        backoff_factor: float = 2.0,
        max_visibility_timeout_s: float = 60.0,
        out_of_order: bool = False,
        seed: int | None = None,
        path: Path | str | None = None,
        synchronous: Synchronous = "FULL",
        clock: Callable[[], float] | None = None,
        max_message_bytes: int = DEFAULT_MAX_MESSAGE_BYTES,
    ) -> None:
        if not 1 <= batch_size <= 10_000:
            raise ValueError("batch_size must be between 1 and 10000")
        if max_receive_count < 1:
            raise ValueError("max_receive_count must be at least 1")
        if visibility_timeout_s < 0 or max_visibility_timeout_s < 0 or backoff_factor < 1:
            raise ValueError("visibility timeouts must be >= 0 and backoff_factor >= 1")
        self.name = name
        self.consumer = consumer
        self.region = region
        self.batch_size = batch_size
        self.batch_window_s = batch_window_s
        self.visibility_timeout_s = visibility_timeout_s
        self.max_receive_count = max_receive_count
        self.backoff_factor = backoff_factor
        self.max_visibility_timeout_s = max_visibility_timeout_s
        self.out_of_order = out_of_order
        self.max_message_bytes = max_message_bytes
        self.url = f"https://sqs.{region}.amazonaws.com/{ACCOUNT}/{name}"
        self.arn = f"arn:aws:sqs:{region}:{ACCOUNT}:{name}"
        self.stats = QueueStats()
        #: ``fail_sends(entry) -> True`` makes that entry fail in ``send_message_batch``.
        self.fail_sends: Callable[[Mapping[str, Any]], bool] | None = None
        #: raised by the next and every following send while set.
        self.send_error: Exception | None = None
        self.store = QueueStore(path, synchronous=synchronous)
        #: wall-clock epoch seconds (persisted deadlines must survive a restart)
        self._now: Callable[[], float] = clock or time.time
        self._duplicates = 0
        self._rng = random.Random(seed)  # noqa: S311 - test fault injection, not crypto
        self._cond = threading.Condition()
        self._stop = False
        self._thread: threading.Thread | None = None

    @property
    def path(self) -> Path | None:
        """The queue's SQLite file, or None when it lives in memory."""
        return self.store.path

    @property
    def dead_letters(self) -> list[dict[str, Any]]:
        """Records that were dead-lettered, oldest first (a copy; persisted when durable)."""
        with self._cond:
            return self.store.dead_letters()

    def retry_delay_s(self, receive_count: int) -> float:
        """How long a record that failed its ``receive_count``-th delivery stays hidden."""
        exponent = max(0, receive_count - 1)
        delay = self.visibility_timeout_s * self.backoff_factor**exponent
        return float(min(delay, self.max_visibility_timeout_s))

    # --- producer side -------------------------------------------------------------------
    def duplicate_next(self, count: int = 1) -> None:
        """Deliver each of the next ``count`` sent messages twice."""
        with self._cond:
            self._duplicates += count

    def send_message_batch(self, Entries: Sequence[Mapping[str, Any]]) -> dict[str, Any]:  # noqa: N803
        """SQS's SendMessageBatch. The accepted entries are committed in one transaction (on
        disk when durable) before it returns: one commit per call, whatever its size."""
        if self.send_error is not None:
            raise self.send_error
        self._check_batch(Entries)
        successful: list[dict[str, Any]] = []
        failed: list[dict[str, Any]] = []
        rows: list[Message] = []
        sent_at = now_ms()
        with self._cond:
            now = self._now()
            duplicates = self._duplicates
            for entry in Entries:
                failure = self._refused(entry)
                if failure is not None:
                    failed.append(failure)
                    continue
                body = str(entry["MessageBody"])
                message_id = str(uuid.uuid4())
                copies = 2 if duplicates > 0 else 1
                duplicates -= copies - 1
                visible_at = now + float(entry.get("DelaySeconds", 0) or 0)
                attributes = dict(entry.get("MessageAttributes") or {})
                rows += [Message(message_id, body, attributes, sent_at, visible_at)] * copies
                successful.append(
                    {"Id": entry["Id"], "MessageId": message_id, "MD5OfMessageBody": _md5(body)}
                )
            if rows:
                self.store.add(rows)  # raises (nothing accepted) when it cannot commit
            self._duplicates = duplicates
            self.stats.sent += len(successful)
            self._cond.notify_all()
        result: dict[str, Any] = {"Successful": successful}
        if failed:
            result["Failed"] = failed
        return result

    def _check_batch(self, entries: Sequence[Mapping[str, Any]]) -> None:
        """Refuse a request SQS would refuse whole (``LocalSqsError``)."""
        if not entries:
            raise LocalSqsError("EmptyBatchRequest", "no entries")
        if len(entries) > MAX_BATCH_ENTRIES:
            raise LocalSqsError("TooManyEntriesInBatchRequest", f"at most {MAX_BATCH_ENTRIES}")
        ids = [str(e.get("Id", "")) for e in entries]
        if len(set(ids)) != len(ids) or not all(ids):
            raise LocalSqsError("BatchEntryIdsNotDistinct", "entry ids must be distinct")
        total = sum(_size(e.get("MessageBody")) for e in entries)
        if total > self.max_message_bytes:
            raise LocalSqsError("BatchRequestTooLong", f"batch over {self.max_message_bytes} bytes")

    def _refused(self, entry: Mapping[str, Any]) -> dict[str, Any] | None:
        """The ``Failed`` item of an entry SQS would refuse (or the test injects), else None."""
        body = entry.get("MessageBody")
        if not isinstance(body, str) or not body:
            message = "MessageBody must be a non-empty string"
            return _failure(entry, "InvalidParameterValue", message)
        if self.fail_sends is not None and self.fail_sends(entry):
            return _failure(entry, "InternalError", "injected send failure", sender=False)
        return None

    def send_message(self, MessageBody: str, **kwargs: Any) -> dict[str, Any]:  # noqa: N803
        entry = {"Id": "0", "MessageBody": MessageBody, **kwargs}
        result = self.send_message_batch([entry])
        if result.get("Failed"):
            failure = result["Failed"][0]
            raise LocalSqsError(str(failure["Code"]), str(failure["Message"]))
        ok = result["Successful"][0]
        return {"MessageId": ok["MessageId"], "MD5OfMessageBody": ok["MD5OfMessageBody"]}

    # --- consumer side -------------------------------------------------------------------
    def _record(self, message: Message) -> dict[str, Any]:
        return {
            "messageId": message.message_id,
            "receiptHandle": message.receipt or f"{message.message_id}#{uuid.uuid4().hex}",
            "body": message.body,
            "attributes": {
                "ApproximateReceiveCount": str(message.receive_count),
                "SentTimestamp": str(message.sent_at_ms),
                "SenderId": "LOCAL",
                "ApproximateFirstReceiveTimestamp": str(message.first_receive_ms),
            },
            "messageAttributes": message.attributes,
            "md5OfBody": _md5(message.body),
            "eventSource": "aws:sqs",
            "eventSourceARN": self.arn,
            "awsRegion": self.region,
        }

    def _take_batch(self) -> list[Message]:
        """Under the lock: up to batch_size visible messages, marked received (committed)."""
        now = self._now()
        if self.out_of_order:
            visible = self.store.visible(now)
            self._rng.shuffle(visible)
            batch = visible[: self.batch_size]
        else:
            batch = self.store.visible(now, self.batch_size)
        if batch:
            self.store.receive(batch, now + PUSH_IN_FLIGHT_S)
        return batch

    def _next_wake(self) -> float | None:
        at = self.store.next_visible_at()
        if at is None:
            return None
        return max(0.0, at - self._now())

    def _failed_ids(self, batch: list[Message], response: Any) -> set[str]:
        all_ids = {m.message_id for m in batch}
        if response is None:
            return set()
        if not isinstance(response, Mapping):
            return all_ids
        failures = response.get("batchItemFailures") or []
        ids: set[str] = set()
        for failure in failures:
            ident = failure.get("itemIdentifier") if isinstance(failure, Mapping) else None
            if not ident or ident not in all_ids:
                return all_ids  # Lambda treats an invalid identifier as a whole-batch failure
            ids.add(str(ident))
        return ids

    def process_once(self) -> int:
        """Deliver one batch of visible messages to the consumer; returns its size."""
        with self._cond:
            batch = self._take_batch()
        if not batch:
            return 0
        try:
            if self.consumer is None:
                raise RuntimeError(f"queue {self.name} has no consumer")
            try:
                response = self.consumer(
                    {"Records": [self._record(m) for m in batch]},
                    FakeLambdaContext(function_name=f"{self.name}-consumer"),
                )
                failed = self._failed_ids(batch, response)
            except Exception:
                _log.exception("consumer of %s raised; the whole batch will be retried", self.name)
                failed = {m.message_id for m in batch}
            self._settle(batch, failed)
        except BaseException:
            self._settle(batch, {m.message_id for m in batch})
            raise
        return len(batch)

    def _settle(self, batch: list[Message], failed: set[str]) -> None:
        delete: list[str] = []
        retry: list[tuple[str, float]] = []
        dead: list[tuple[str | None, dict[str, Any]]] = []
        with self._cond:
            now = self._now()
            self.stats.delivered += len(batch)
            for m in batch:
                assert m.receipt is not None
                if m.message_id not in failed:
                    self.stats.succeeded += 1
                    delete.append(m.receipt)
                    continue
                self.stats.failed += 1
                if m.receive_count >= self.max_receive_count:
                    self.stats.dead_lettered += 1
                    dead.append((m.receipt, self._record(m)))
                else:
                    retry.append((m.receipt, now + self.retry_delay_s(m.receive_count)))
            try:
                self.store.settle(delete=delete, retry=retry, dead=dead)
            finally:
                self._cond.notify_all()

    def _run(self) -> None:
        while True:
            try:
                with self._cond:
                    while not self._stop:
                        wake = self._next_wake()
                        if wake == 0.0:
                            break
                        self._cond.wait(timeout=min(wake, 1.0) if wake is not None else 1.0)
                    if self._stop:
                        return
                if self.batch_window_s > 0:
                    time.sleep(self.batch_window_s)
                self.process_once()
            except Exception:
                _log.exception("queue worker %s", self.name)
                time.sleep(0.5)  # e.g. the queue file is unreadable: do not spin

    def start(self) -> LocalQueue:
        if self._thread is None:
            self._stop = False
            self._thread = threading.Thread(target=self._run, name=f"sqs-{self.name}", daemon=True)
            self._thread.start()
        return self

    def stop(self, timeout: float = 10.0) -> None:
        """Stop the worker (messages stay queued; a durable queue keeps them on disk)."""
        with self._cond:
            self._stop = True
            self._cond.notify_all()
        if self._thread is not None:
            self._thread.join(timeout)
            self._thread = None

    def close(self) -> None:
        """Stop the worker and close the queue file (a later use opens it again). An
        in-memory queue keeps its messages."""
        self.stop()
        with self._cond:
            self.store.close()

    def pending(self) -> int:
        """Messages queued, delayed or in flight (not dead letters)."""
        with self._cond:
            return self.store.count()

    def messages(self) -> list[Message]:
        """A snapshot of every message queued, delayed or in flight, in send order."""
        with self._cond:
            return self.store.messages()

    def drain(self, timeout: float = 30.0) -> bool:
        """Wait until every message was consumed or dead-lettered. True if drained in time."""
        deadline = time.monotonic() + timeout
        with self._cond:
            while self.store.count():
                remaining = deadline - time.monotonic()
                if remaining <= 0:
                    return False
                self._cond.wait(timeout=min(remaining, 0.1))
        return True


@dataclass
class LocalSqs:
    """A boto3-SQS-client-shaped front for several ``LocalQueue``s, addressed by URL."""

    queues: dict[str, LocalQueue] = field(default_factory=dict)

    def add_queue(self, queue: LocalQueue) -> str:
        self.queues[queue.url] = queue
        return queue.url

    def queue(self, url_or_name: str) -> LocalQueue:
        found = self.queues.get(url_or_name) or next(
            (q for q in self.queues.values() if q.name == url_or_name), None
        )
        if found is None:
            raise LocalSqsError("AWS.SimpleQueueService.NonExistentQueue", url_or_name)
        return found

    def get_queue_url(self, QueueName: str) -> dict[str, str]:  # noqa: N803
        return {"QueueUrl": self.queue(QueueName).url}

    def send_message_batch(
        self,
        QueueUrl: str,  # noqa: N803
        Entries: Sequence[Mapping[str, Any]],  # noqa: N803
    ) -> dict[str, Any]:
        return self.queue(QueueUrl).send_message_batch(Entries)

    def send_message(self, QueueUrl: str, MessageBody: str, **kwargs: Any) -> dict[str, Any]:  # noqa: N803
        return self.queue(QueueUrl).send_message(MessageBody, **kwargs)

    def start(self) -> LocalSqs:
        for q in self.queues.values():
            q.start()
        return self

    def drain(self, timeout: float = 30.0) -> bool:
        deadline = time.monotonic() + timeout
        ok = True
        for q in self.queues.values():
            ok = q.drain(max(0.0, deadline - time.monotonic())) and ok
        return ok

    def stop(self, timeout: float = 10.0) -> None:
        for q in self.queues.values():
            with contextlib.suppress(Exception):
                q.stop(timeout)

    def close(self) -> None:
        """Stop every worker and close the queue files."""
        for q in self.queues.values():
            with contextlib.suppress(Exception):
                q.close()

    def drain_and_stop(self, timeout: float = 30.0) -> bool:
        """A drain hook for ``LocalService``."""
        ok = self.drain(timeout)
        self.stop()
        return ok
