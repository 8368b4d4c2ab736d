"""Time as epoch milliseconds, injectable so tests can walk through days."""

from __future__ import annotations

import time
from typing import Protocol

MS_PER_DAY = 86_400_000


class Clock(Protocol):
    def now_ms(self) -> int: ...


class SystemClock:
    def now_ms(self) -> int:
        return time.time_ns() // 1_000_000


class FakeClock:
    """A clock that only moves when told to."""

    def __init__(self, start_ms: int = 1_767_225_600_000) -> None:  # 2026-01-01T00:00:00Z
        self._now = start_ms

    def now_ms(self) -> int:
        return self._now

    def set(self, now_ms: int) -> None:
        self._now = now_ms

    def advance(self, *, ms: int = 0, seconds: float = 0, days: float = 0) -> int:
        self._now += ms + int(seconds * 1000) + int(days * MS_PER_DAY)
        return self._now
