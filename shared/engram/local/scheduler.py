"""A stand-in for an EventBridge schedule: runs a callable every N seconds until stopped.

Runs never overlap; an exception is logged and the next run still happens. ``stop()`` waits
for a run in progress to finish (use it as a drain hook).
"""

from __future__ import annotations

import logging
import threading
from collections.abc import Callable

_log = logging.getLogger("engram.local.scheduler")


class Periodic:
    def __init__(
        self,
        fn: Callable[[], object],
        interval_s: float,
        *,
        name: str = "maintenance",
        run_immediately: bool = False,
    ) -> None:
        if interval_s <= 0:
            raise ValueError("interval_s must be positive")
        self.fn = fn
        self.interval_s = interval_s
        self.name = name
        self.run_immediately = run_immediately
        self.runs = 0
        self.failures = 0
        self._stop = threading.Event()
        self._thread: threading.Thread | None = None

    def run_once(self) -> None:
        try:
            self.fn()
        except Exception:
            self.failures += 1
            _log.exception("scheduled job %s failed", self.name)
        finally:
            self.runs += 1

    def _loop(self) -> None:
        if self.run_immediately and not self._stop.is_set():
            self.run_once()
        while not self._stop.wait(self.interval_s):
            self.run_once()

    def start(self) -> Periodic:
        if self._thread is None:
            self._stop.clear()
            self._thread = threading.Thread(
                target=self._loop, name=f"schedule-{self.name}", daemon=True
            )
            self._thread.start()
        return self

    def stop(self, timeout: float = 30.0) -> bool:
        """Stop the timer; waits for a run in progress. True if the thread ended in time."""
        self._stop.set()
        thread, self._thread = self._thread, None
        if thread is None:
            return True
        thread.join(timeout)
        return not thread.is_alive()

    @property
    def running(self) -> bool:
        return self._thread is not None and self._thread.is_alive()
