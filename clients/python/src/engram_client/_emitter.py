"""Fire-and-forget emission: a bounded queue and one background thread that delivers events
in batches, counting (never raising) what could not be delivered."""

from __future__ import annotations

import asyncio
import contextlib
import logging
import queue
import threading
import time
from collections.abc import Awaitable, Callable, Iterable, Mapping
from dataclasses import dataclass
from typing import Any

from engram_client._errors import EngramError

_log = logging.getLogger("engram_client")

MAX_EVENTS_PER_REQUEST = 100
_STOP = object()


@dataclass(frozen=True)
class DrainReport:
    """What happened to the emitted events so far (counts since the client was made).

    True when every emitted event was settled (sent or failed) before the timeout.
    """

    done: bool
    sent: int
    """Events the service accepted (202)."""
    failed: int
    """Events not delivered: refused by the service, or given up on (``gave_up``)."""
    gave_up: int
    """Of ``failed``: events whose batch met only 429, 503 or connection errors until the
    retry bounds were reached."""
    dropped: int
    """Events thrown away because the queue was full."""
    pending: int
    """Events still queued or in flight."""

    def __bool__(self) -> bool:
        return self.done


class Tally:
    """The counts behind a ``DrainReport``; ``settle`` books a delivered or failed batch."""

    def __init__(self) -> None:
        self.dropped = self.failed = self.gave_up = self.sent = self.pending = 0

    def settle(self, size: int, error: BaseException | None) -> None:
        self.pending -= size
        if error is None:
            self.sent += size
            return
        self.failed += size
        if isinstance(error, EngramError):
            self.gave_up += size if error.gave_up else 0
            _log.warning("engram: %d events not delivered: %s", size, error)
        else:  # never into the chat turn, whatever went wrong
            _log.warning("engram: %d events not delivered: %r", size, error)

    def report(self) -> DrainReport:
        return DrainReport(
            done=self.pending <= 0,
            sent=self.sent,
            failed=self.failed,
            gave_up=self.gave_up,
            dropped=self.dropped,
            pending=max(0, self.pending),
        )


def _take_batch(first: object, more: Callable[[], object]) -> tuple[list[dict[str, Any]], bool]:
    """``first`` and what ``more()`` gives without waiting (``queue.Empty`` / ``QueueEmpty``
    ends it), up to ``MAX_EVENTS_PER_REQUEST``; True when the stop marker was met."""
    batch: list[dict[str, Any]] = [first]  # type: ignore[list-item]
    while len(batch) < MAX_EVENTS_PER_REQUEST:
        try:
            item = more()
        except (queue.Empty, asyncio.QueueEmpty):
            break
        if item is _STOP:
            return batch, True
        batch.append(item)  # type: ignore[arg-type]
    return batch, False


class Emitter:
    """``emit`` queues events (dropping and counting them when the queue is full); a daemon
    thread hands batches of up to ``MAX_EVENTS_PER_REQUEST`` to ``deliver``, which raises on
    failure (an ``EngramError`` says whether it ``gave_up`` retrying)."""

    def __init__(self, deliver: Callable[[list[dict[str, Any]]], None], *, queue_size: int) -> None:
        self.deliver = deliver
        self.queue_size = queue_size
        self._queue: queue.Queue[object] = queue.Queue(maxsize=queue_size)
        self._worker: threading.Thread | None = None
        self._worker_lock = threading.Lock()
        self._cond = threading.Condition()  # guards the tally
        self.tally = Tally()

    def emit(self, events: Iterable[Mapping[str, Any]]) -> int:
        self._ensure_worker()
        queued = 0
        for event in events:
            with self._cond:
                self.tally.pending += 1
            try:
                self._queue.put_nowait(dict(event))
                queued += 1
            except queue.Full:
                with self._cond:
                    self.tally.pending -= 1
                    self.tally.dropped += 1
                    self._cond.notify_all()
        return queued

    def _ensure_worker(self) -> None:
        if self._worker is not None and self._worker.is_alive():
            return
        with self._worker_lock:
            if self._worker is None or not self._worker.is_alive():
                self._worker = threading.Thread(target=self._run, name="engram-emit", daemon=True)
                self._worker.start()

    def _run(self) -> None:
        while True:
            item = self._queue.get()
            if item is _STOP:
                return
            batch, stop_after = _take_batch(item, self._queue.get_nowait)
            error: BaseException | None = None
            try:
                self.deliver(batch)
            except Exception as exc:
                error = exc
            with self._cond:
                self.tally.settle(len(batch), error)
                self._cond.notify_all()
            if stop_after:
                return

    def drain(self, timeout: float) -> DrainReport:
        deadline = time.monotonic() + timeout
        with self._cond:
            while self.tally.pending > 0:
                remaining = deadline - time.monotonic()
                if remaining <= 0:
                    break
                self._cond.wait(remaining)
            return self.tally.report()

    def stop(self) -> None:
        """End the worker after what is queued (bounded waits)."""
        worker = self._worker
        if worker is not None and worker.is_alive():
            with contextlib.suppress(queue.Full):
                self._queue.put(_STOP, timeout=1)
            worker.join(timeout=2)


class AsyncEmitter:
    """``Emitter`` for the async client: the same queue bound, batches and counts, with an
    asyncio task instead of a thread (``emit`` is called from the event loop)."""

    def __init__(
        self, deliver: Callable[[list[dict[str, Any]]], Awaitable[None]], *, queue_size: int
    ) -> None:
        self.deliver = deliver
        self.queue_size = queue_size
        self._queue: asyncio.Queue[object] = asyncio.Queue(maxsize=queue_size)
        self._task: asyncio.Task[None] | None = None
        self._settled: asyncio.Condition | None = None
        self.tally = Tally()

    def emit(self, events: Iterable[Mapping[str, Any]]) -> int:
        if self._task is None or self._task.done():
            self._task = asyncio.get_running_loop().create_task(self._run(), name="engram-emit")
        queued = 0
        for event in events:
            try:
                self._queue.put_nowait(dict(event))
            except asyncio.QueueFull:
                self.tally.dropped += 1
            else:
                self.tally.pending += 1
                queued += 1
        return queued

    def _condition(self) -> asyncio.Condition:
        if self._settled is None:
            self._settled = asyncio.Condition()
        return self._settled

    async def _run(self) -> None:
        while True:
            item = await self._queue.get()
            batch, _ = _take_batch(item, self._queue.get_nowait)
            error: BaseException | None = None
            try:
                await self.deliver(batch)
            except Exception as exc:
                error = exc
            settled = self._condition()
            async with settled:
                self.tally.settle(len(batch), error)
                settled.notify_all()

    async def drain(self, timeout: float) -> DrainReport:
        settled = self._condition()
        with contextlib.suppress(TimeoutError):
            async with asyncio.timeout(timeout), settled:
                await settled.wait_for(lambda: self.tally.pending <= 0)
        return self.tally.report()

    async def stop(self, grace: float = 2.0) -> None:
        """End the worker once what is queued is settled, at most ``grace`` seconds later
        (the client has set its closing event first, so a waiting retry gives up at once)."""
        await self.drain(grace)
        task, self._task = self._task, None
        if task is not None and not task.done():
            task.cancel()
            with contextlib.suppress(asyncio.CancelledError):
                await task
