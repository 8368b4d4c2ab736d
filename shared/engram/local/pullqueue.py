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

Receives, receipts, receive counts, deadlines and dead letters are the queue's own (its
``QueueStore``): on a durable queue (``path=``) they survive a restart, and whatever was in
flight when the process died is visible again when the queue file is next opened.

:class:`PullQueue` is a ``LocalQueue`` that is meant to be pulled: no worker thread
(``start`` does nothing, ``drain`` does not wait) and the receiver's methods on itself.
"""

from __future__ import annotations

import threading
import weakref
from pathlib import Path
from typing import Any

from engram.local.queue_store import Message, Synchronous
from engram.local.sqs import LocalQueue, LocalSqsError
from engram.maintenance.models import QueueMessage


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

    @property
    def dead_letters(self) -> list[dict[str, Any]]:
        return self.queue.dead_letters

    def _now(self) -> float:
        return self.queue._now()  # the clock the queue's sends use

    def in_flight(self) -> int:
        """Messages received and neither deleted nor released (expired ones included until
        they are received again)."""
        with self.queue._cond:
            return self.queue.store.in_flight()

    def receive(self, max_messages: int) -> list[QueueMessage]:
        q = self.queue
        limit = max(1, min(10, max_messages))
        out: list[Message] = []
        dead: list[Message] = []
        with q._cond:
            now = self._now()
            for m in q.store.visible(now):
                if len(out) >= limit:
                    break
                if self.max_receive_count is not None and m.receive_count >= self.max_receive_count:
                    dead.append(m)
                    continue
                out.append(m)
            if dead:
                q.store.dead_letter_rows(
                    [m.sequence for m in dead],
                    [self._dead(m, "maxReceiveCount exceeded") for m in dead],
                )
                q.stats.dead_lettered += len(dead)
            if out:
                q.store.receive(out, now + self.visibility_timeout_s)
                q.stats.delivered += len(out)
            q._cond.notify_all()
        return [QueueMessage(m.message_id, m.receipt or "", m.receive_count, m.body) for m in out]

    def _settled(self, matched: int) -> None:
        if matched == 0:
            raise LocalSqsError("ReceiptHandleIsInvalid", "unknown or expired receipt handle")

    def delete(self, receipt: str) -> None:
        with self.queue._cond:
            self._settled(self.queue.store.settle(delete=[receipt]))
            self.queue.stats.succeeded += 1
            self.queue._cond.notify_all()

    def release(self, receipt: str, delay_s: int) -> None:
        with self.queue._cond:
            visible_at = self._now() + max(0, delay_s)
            self._settled(self.queue.store.settle(retry=[(receipt, visible_at)]))
            self.queue.stats.failed += 1
            self.queue._cond.notify_all()

    def dead_letter(self, message: QueueMessage, reason: str) -> None:
        body = message.body if isinstance(message.body, str) else message.body.to_json()
        record = {
            "messageId": message.message_id,
            "body": body,
            "reason": reason,
            "attributes": {"ApproximateReceiveCount": str(message.receive_count)},
        }
        with self.queue._cond:
            self.queue.store.settle(dead=[(None, record)])
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
        path: Path | str | None = None,
        synchronous: Synchronous = "FULL",
    ) -> None:
        super().__init__(
            name,
            None,
            region=region,
            visibility_timeout_s=visibility_timeout_s,
            max_receive_count=max_receive_count or 1,
            path=path,
            synchronous=synchronous,
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
