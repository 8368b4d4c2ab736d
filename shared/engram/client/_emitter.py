"""Fire-and-forget emission: a bounded queue and one background thread that delivers events
in batches, counting (never raising) what could not be delivered."""

from __future__ import annotations

import contextlib
import logging
import queue
import threading
import time
from collections.abc import Callable, Iterable, Mapping
from dataclasses import dataclass
from typing import Any

from engram.client._errors import EngramError

_log = logging.getLogger("engram.client")

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
        self._pending = 0
        self._cond = threading.Condition()  # guards _pending and the counters
        self.dropped = self.failed = self.gave_up = self.sent = 0

    def emit(self, events: Iterable[Mapping[str, Any]]) -> int:
        self._ensure_worker()
        queued = 0
        for event in events:
            with self._cond:
                self._pending += 1
            try:
                self._queue.put_nowait(dict(event))
                queued += 1
            except queue.Full:
                with self._cond:
                    self._pending -= 1
                    self.dropped += 1
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
            batch: list[dict[str, Any]] = [item]  # type: ignore[list-item]
            stop_after = False
            while len(batch) < MAX_EVENTS_PER_REQUEST:
                try:
                    more = self._queue.get_nowait()
                except queue.Empty:
                    break
                if more is _STOP:
                    stop_after = True
                    break
                batch.append(more)  # type: ignore[arg-type]
            self._send(batch)
            if stop_after:
                return

    def _send(self, batch: list[dict[str, Any]]) -> None:
        sent = failed = gave_up = 0
        try:
            self.deliver(batch)
            sent = len(batch)
        except EngramError as exc:
            failed = len(batch)
            gave_up = failed if exc.gave_up else 0
            _log.warning("engram: %d events not delivered: %s", failed, exc)
        except Exception as exc:  # never into the chat turn, whatever went wrong
            failed = len(batch)
            _log.warning("engram: %d events not delivered: %r", failed, exc)
        with self._cond:
            self.sent += sent
            self.failed += failed
            self.gave_up += gave_up
            self._pending -= len(batch)
            self._cond.notify_all()

    def drain(self, timeout: float) -> DrainReport:
        deadline = time.monotonic() + timeout
        with self._cond:
            while self._pending > 0:
                remaining = deadline - time.monotonic()
                if remaining <= 0:
                    break
                self._cond.wait(remaining)
            return DrainReport(
                done=self._pending <= 0,
                sent=self.sent,
                failed=self.failed,
                gave_up=self.gave_up,
                dropped=self.dropped,
                pending=max(0, self._pending),
            )

    def stop(self) -> None:
        """End the worker after what is queued (bounded waits)."""
        worker = self._worker
        if worker is not None and worker.is_alive():
            with contextlib.suppress(queue.Full):
                self._queue.put(_STOP, timeout=1)
            worker.join(timeout=2)
