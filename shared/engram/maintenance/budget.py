"""The time budget of one maintenance run."""

from __future__ import annotations

import time

from engram.clock import Clock


class MonotonicClock:
    """Milliseconds from ``time.monotonic_ns`` (immune to wall-clock jumps)."""

    def now_ms(self) -> int:
        return time.monotonic_ns() // 1_000_000


class Budget:
    """A deadline on a monotonic clock: ``allowed_ms`` from now.

    The job asks :meth:`exhausted` before every bounded step (one identity, one policy, one
    erasure, one queue message), so a run stops cleanly with its cursors saved; the caller
    passes the Lambda's remaining time minus a safety margin that covers one step."""

    def __init__(self, clock: Clock, allowed_ms: int) -> None:
        self._clock = clock
        self.started_ms = clock.now_ms()
        self.deadline_ms = self.started_ms + max(0, allowed_ms)

    def remaining_ms(self) -> int:
        return max(0, self.deadline_ms - self._clock.now_ms())

    def exhausted(self) -> bool:
        return self._clock.now_ms() >= self.deadline_ms
