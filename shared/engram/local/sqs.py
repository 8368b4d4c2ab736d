"""An in-process stand-in for SQS + the Lambda event source mapping.

``LocalSqs`` looks like the slice of a boto3 SQS client the ingest side uses
(``send_message_batch(QueueUrl=..., Entries=[{"Id", "MessageBody", ...}])`` returning
``{"Successful": [...], "Failed": [...]}``, plus ``send_message`` and ``get_queue_url``), so
the SQS adapter can be handed either. Each queue has a worker thread that invokes its consumer
handler with SQS-shaped events (``Records`` with ``messageId``, ``receiptHandle``, ``body``,
``attributes.ApproximateReceiveCount``, ``eventSourceARN``...) in batches, exactly as Lambda
does:

* a response ``{"batchItemFailures": [{"itemIdentifier": messageId}]}`` redelivers only those
  records, after the visibility timeout; a handler that raises fails the whole batch;
* a record that failed ``max_receive_count`` times moves to the queue's ``dead_letters``;
* ``drain(timeout)`` waits until nothing is queued, delayed or in flight.

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
from typing import Any

from engram.local.server import FakeLambdaContext

_log = logging.getLogger("engram.local.sqs")

ACCOUNT = "000000000000"
MAX_BATCH_ENTRIES = 10
MAX_BATCH_BYTES = 256 * 1024

Consumer = Callable[[dict[str, Any], Any], Any]


class LocalSqsError(Exception):
    """Raised like botocore's ClientError for a request SQS would reject; ``code`` says why."""

    def __init__(self, code: str, message: str) -> None:
        super().__init__(f"{code}: {message}")
        self.code = code
        self.message = message


@dataclass
class Message:
    message_id: str
    body: str
    attributes: dict[str, Any]
    sent_at_ms: int
    visible_at: float
    receive_count: int = 0
    first_receive_ms: int | None = None
    sequence: int = 0


@dataclass
class QueueStats:
    sent: int = 0
    delivered: int = 0
    succeeded: int = 0
    failed: int = 0
    dead_lettered: int = 0


def _md5(text: str) -> str:
    return hashlib.md5(text.encode("utf-8"), usedforsecurity=False).hexdigest()


class LocalQueue:
    """One queue with its event source mapping to ``consumer``."""

    def __init__(
        self,
        name: str,
        consumer: Consumer | None = None,
        *,
        region: str = "us-east-1",
        batch_size: int = 10,
        batch_window_s: float = 0.0,
        visibility_timeout_s: float = 1.0,
        max_receive_count: int = 3,
        out_of_order: bool = False,
        seed: int | None = None,
    ) -> None:
        if not 1 <= batch_size <= 10_000:
            raise ValueError("batch_size must be between 1 and 10000")
        if max_receive_count < 1:
            raise ValueError("max_receive_count must be at least 1")
        self.name = name
        self.consumer = consumer
        self.region = region
        self.batch_size = batch_size
        self.batch_window_s = batch_window_s
        self.visibility_timeout_s = visibility_timeout_s
        self.max_receive_count = max_receive_count
        self.out_of_order = out_of_order
        self.url = f"https://sqs.{region}.amazonaws.com/{ACCOUNT}/{name}"
        self.arn = f"arn:aws:sqs:{region}:{ACCOUNT}:{name}"
        self.dead_letters: list[dict[str, Any]] = []
        self.stats = QueueStats()
        #: ``fail_sends(entry) -> True`` makes that entry fail in ``send_message_batch``.
        self.fail_sends: Callable[[Mapping[str, Any]], bool] | None = None
        #: raised by the next and every following send while set.
        self.send_error: Exception | None = None
        self._messages: list[Message] = []
        self._inflight = 0
        self._duplicates = 0
        self._seq = 0
        self._rng = random.Random(seed)  # noqa: S311 - test fault injection, not crypto
        self._cond = threading.Condition()
        self._stop = False
        self._thread: threading.Thread | None = None

    # --- producer side -------------------------------------------------------------------
    def duplicate_next(self, count: int = 1) -> None:
        """Deliver each of the next ``count`` sent messages twice."""
        with self._cond:
            self._duplicates += count

    def send_message_batch(self, Entries: Sequence[Mapping[str, Any]]) -> dict[str, Any]:  # noqa: N803
        if self.send_error is not None:
            raise self.send_error
        if not Entries:
            raise LocalSqsError("EmptyBatchRequest", "no entries")
        if len(Entries) > MAX_BATCH_ENTRIES:
            raise LocalSqsError("TooManyEntriesInBatchRequest", f"at most {MAX_BATCH_ENTRIES}")
        ids = [str(e.get("Id", "")) for e in Entries]
        if len(set(ids)) != len(ids) or not all(ids):
            raise LocalSqsError("BatchEntryIdsNotDistinct", "entry ids must be distinct")
        total = sum(len(str(e.get("MessageBody", "")).encode("utf-8")) for e in Entries)
        if total > MAX_BATCH_BYTES:
            raise LocalSqsError("BatchRequestTooLong", f"batch over {MAX_BATCH_BYTES} bytes")
        successful: list[dict[str, Any]] = []
        failed: list[dict[str, Any]] = []
        now_ms = time.time_ns() // 1_000_000
        with self._cond:
            for entry in Entries:
                body = entry.get("MessageBody")
                if not isinstance(body, str) or not body:
                    failed.append(
                        {
                            "Id": entry["Id"],
                            "SenderFault": True,
                            "Code": "InvalidParameterValue",
                            "Message": "MessageBody must be a non-empty string",
                        }
                    )
                    continue
                if self.fail_sends is not None and self.fail_sends(entry):
                    failed.append(
                        {
                            "Id": entry["Id"],
                            "SenderFault": False,
                            "Code": "InternalError",
                            "Message": "injected send failure",
                        }
                    )
                    continue
                message_id = str(uuid.uuid4())
                delay = float(entry.get("DelaySeconds", 0) or 0)
                copies = 1
                if self._duplicates > 0:
                    self._duplicates -= 1
                    copies = 2
                for _ in range(copies):
                    self._seq += 1
                    self._messages.append(
                        Message(
                            message_id=message_id,
                            body=body,
                            attributes=dict(entry.get("MessageAttributes") or {}),
                            sent_at_ms=now_ms,
                            visible_at=time.monotonic() + delay,
                            sequence=self._seq,
                        )
                    )
                self.stats.sent += 1
                successful.append(
                    {"Id": entry["Id"], "MessageId": message_id, "MD5OfMessageBody": _md5(body)}
                )
            self._cond.notify_all()
        result: dict[str, Any] = {"Successful": successful}
        if failed:
            result["Failed"] = failed
        return result

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
            "receiptHandle": f"{message.message_id}#{uuid.uuid4().hex}",
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
        """Under the lock: remove up to batch_size visible messages and mark them received."""
        now = time.monotonic()
        visible = [m for m in self._messages if m.visible_at <= now]
        if not visible:
            return []
        if self.out_of_order:
            self._rng.shuffle(visible)
        else:
            visible.sort(key=lambda m: m.sequence)
        batch = visible[: self.batch_size]
        taken = {id(m) for m in batch}
        self._messages = [m for m in self._messages if id(m) not in taken]
        now_ms = time.time_ns() // 1_000_000
        for m in batch:
            m.receive_count += 1
            if m.first_receive_ms is None:
                m.first_receive_ms = now_ms
        self._inflight += len(batch)
        return batch

    def _next_wake(self) -> float | None:
        if not self._messages:
            return None
        return max(0.0, min(m.visible_at for m in self._messages) - time.monotonic())

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
        with self._cond:
            self.stats.delivered += len(batch)
            for m in batch:
                if m.message_id not in failed:
                    self.stats.succeeded += 1
                    continue
                self.stats.failed += 1
                if m.receive_count >= self.max_receive_count:
                    self.stats.dead_lettered += 1
                    self.dead_letters.append(self._record(m))
                else:
                    m.visible_at = time.monotonic() + self.visibility_timeout_s
                    self._messages.append(m)
            self._inflight -= len(batch)
            self._cond.notify_all()

    def _run(self) -> None:
        while True:
            with self._cond:
                while not self._stop:
                    wake = self._next_wake()
                    if wake == 0.0:
                        break
                    self._cond.wait(timeout=wake if wake is not None else 1.0)
                if self._stop:
                    return
            if self.batch_window_s > 0:
                time.sleep(self.batch_window_s)
            try:
                self.process_once()
            except Exception:
                _log.exception("queue worker %s", self.name)

    def start(self) -> LocalQueue:
        if self._thread is None:
            self._stop = False
            self._thread = threading.Thread(target=self._run, name=f"sqs-{self.name}", daemon=True)
            self._thread.start()
        return self

    def stop(self, timeout: float = 10.0) -> None:
        with self._cond:
            self._stop = True
            self._cond.notify_all()
        if self._thread is not None:
            self._thread.join(timeout)
            self._thread = None

    def pending(self) -> int:
        """Messages queued, delayed or in flight (not dead letters)."""
        with self._cond:
            return len(self._messages) + self._inflight

    def drain(self, timeout: float = 30.0) -> bool:
        """Wait until every message was consumed or dead-lettered. True if drained in time."""
        deadline = time.monotonic() + timeout
        with self._cond:
            while self._messages or self._inflight:
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

    def drain_and_stop(self, timeout: float = 30.0) -> bool:
        """A drain hook for ``LocalService``."""
        ok = self.drain(timeout)
        self.stop()
        return ok
