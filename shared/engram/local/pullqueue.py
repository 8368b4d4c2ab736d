"""A pull-based in-process queue for the local service: the extraction queue.

In AWS the maintenance job polls the extraction queue (SQS) itself. Locally the transcript
route sends to an ``engram.local.sqs.LocalQueue`` through ``LocalSqs.send_message_batch``
(exactly as to SQS), and the job pulls from it through :class:`LocalQueueReceiver`, which
implements ``engram.maintenance.ports.TranscriptQueue`` over any ``LocalQueue`` without a
consumer:

* ``receive`` hands out visible messages in send order, each with a receipt handle and its
  receive count, and hides them for ``visibility_timeout_s``; one not deleted or released
  in time becomes visible again at the next ``receive`` (its old receipt is then invalid;
  until then, as with SQS, the late delete or release still works);
* ``release(receipt, delay_s)`` makes it visible again after ``delay_s``; ``delete`` removes
  it; ``dead_letter`` copies it (with the reason) to ``dead_letters``;
* ``max_receive_count`` (optional) is SQS's redrive backstop: a message received that many
  times without being deleted moves to ``dead_letters`` instead of being handed out again.

:class:`PullQueue` is a ``LocalQueue`` that is meant to be pulled: no worker thread
(``start`` does nothing, ``drain`` does not wait) and the receiver's methods on itself.
"""

from __future__ import annotations

import threading
import time
import uuid
import weakref
from dataclasses import dataclass
from typing import Any

from engram.local.sqs import LocalQueue, LocalSqsError, Message
from engram.maintenance.models import QueueMessage


@dataclass
class _InFlight:
    message: Message
    deadline: float


class LocalQueueReceiver:
    """``TranscriptQueue`` over one ``LocalQueue`` (see the module docstring)."""

    def __init__(
        self,
        queue: LocalQueue,
        *,
        visibility_timeout_s: float = 300.0,
        max_receive_count: int | None = None,
    ) -> None:
        if max_receive_count is not None and max_receive_count < 1:
            raise ValueError("max_receive_count must be at least 1")
        self.queue = queue
        self.visibility_timeout_s = visibility_timeout_s
        self.max_receive_count = max_receive_count
        self._now = time.monotonic  # the clock LocalQueue's sends use
        self._inflight: dict[str, _InFlight] = {}

    @property
    def dead_letters(self) -> list[dict[str, Any]]:
        return self.queue.dead_letters

    def in_flight(self) -> int:
        with self.queue._cond:
            return len(self._inflight)

    def _expire(self, now: float) -> None:
        """Under the queue's lock: in-flight messages past their deadline become visible."""
        for receipt, item in list(self._inflight.items()):
            if item.deadline <= now:
                del self._inflight[receipt]
                item.message.visible_at = item.deadline
                self.queue._messages.append(item.message)
                self.queue._inflight -= 1

    def _take(self, receipt: str) -> Message:
        item = self._inflight.pop(receipt, None)
        if item is None:
            raise LocalSqsError("ReceiptHandleIsInvalid", "unknown or expired receipt handle")
        self.queue._inflight -= 1
        return item.message

    def receive(self, max_messages: int) -> list[QueueMessage]:
        q = self.queue
        out: list[QueueMessage] = []
        with q._cond:
            now = self._now()
            self._expire(now)
            visible = sorted(
                (m for m in q._messages if m.visible_at <= now), key=lambda m: m.sequence
            )
            taken: set[int] = set()
            for m in visible:
                if len(out) >= max(1, min(10, max_messages)):
                    break
                taken.add(id(m))
                if self.max_receive_count is not None and m.receive_count >= self.max_receive_count:
                    q.dead_letters.append(self._dead(m, "maxReceiveCount exceeded"))
                    q.stats.dead_lettered += 1
                    continue
                m.receive_count += 1
                if m.first_receive_ms is None:
                    m.first_receive_ms = time.time_ns() // 1_000_000
                receipt = f"{m.message_id}#{uuid.uuid4().hex}"
                self._inflight[receipt] = _InFlight(m, now + self.visibility_timeout_s)
                q._inflight += 1
                q.stats.delivered += 1
                out.append(QueueMessage(m.message_id, receipt, m.receive_count, m.body))
            q._messages = [m for m in q._messages if id(m) not in taken]
            q._cond.notify_all()
        return out

    def delete(self, receipt: str) -> None:
        with self.queue._cond:
            self._take(receipt)
            self.queue.stats.succeeded += 1
            self.queue._cond.notify_all()

    def release(self, receipt: str, delay_s: int) -> None:
        with self.queue._cond:
            now = self._now()
            message = self._take(receipt)
            message.visible_at = now + max(0, delay_s)
            self.queue._messages.append(message)
            self.queue.stats.failed += 1
            self.queue._cond.notify_all()

    def dead_letter(self, message: QueueMessage, reason: str) -> None:
        body = message.body if isinstance(message.body, str) else message.body.to_json()
        with self.queue._cond:
            self.queue.dead_letters.append(
                {
                    "messageId": message.message_id,
                    "body": body,
                    "reason": reason,
                    "attributes": {"ApproximateReceiveCount": str(message.receive_count)},
                }
            )
            self.queue.stats.dead_lettered += 1

    def _dead(self, m: Message, reason: str) -> dict[str, Any]:
        return {
            "messageId": m.message_id,
            "body": m.body,
            "reason": reason,
            "attributes": {"ApproximateReceiveCount": str(m.receive_count)},
        }


_receivers: weakref.WeakKeyDictionary[LocalQueue, LocalQueueReceiver] = weakref.WeakKeyDictionary()
_receivers_lock = threading.Lock()


def receiver_for(queue: LocalQueue, **options: Any) -> LocalQueueReceiver:
    """The one receiver of ``queue`` (in-flight receipts live in it, so every puller of a
    queue must share it); ``options`` apply when it is first made."""
    with _receivers_lock:
        found = _receivers.get(queue)
        if found is None:
            found = queue.receiver if isinstance(queue, PullQueue) else None
            found = found or LocalQueueReceiver(queue, **options)
            _receivers[queue] = found
        return found


class PullQueue(LocalQueue):
    """A ``LocalQueue`` without a consumer, pulled through its :attr:`receiver`; it is also a
    ``TranscriptQueue`` itself (``receive`` / ``delete`` / ``release`` / ``dead_letter``)."""

    def __init__(
        self,
        name: str,
        *,
        region: str = "us-east-1",
        visibility_timeout_s: float = 300.0,
        max_receive_count: int | None = None,
    ) -> None:
        super().__init__(
            name,
            None,
            region=region,
            visibility_timeout_s=visibility_timeout_s,
            max_receive_count=max_receive_count or 1,
        )
        self.receiver = LocalQueueReceiver(
            self,
            visibility_timeout_s=visibility_timeout_s,
            max_receive_count=max_receive_count,
        )

    def start(self) -> PullQueue:  # nothing to run: the maintenance job pulls
        return self

    def stop(self, timeout: float = 10.0) -> None:
        return None

    def drain(self, timeout: float = 30.0) -> bool:
        """Nothing drains a pulled queue but the job: True when nothing is left in it."""
        return self.pending() == 0

    def receive(self, max_messages: int) -> list[QueueMessage]:
        return self.receiver.receive(max_messages)

    def delete(self, receipt: str) -> None:
        self.receiver.delete(receipt)

    def release(self, receipt: str, delay_s: int) -> None:
        self.receiver.release(receipt, delay_s)

    def dead_letter(self, message: QueueMessage, reason: str) -> None:
        self.receiver.dead_letter(message, reason)
