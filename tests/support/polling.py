"""Wait for a condition that another process or thread makes true."""

from __future__ import annotations

import time
from collections.abc import Callable
from typing import TypeVar

T = TypeVar("T")


def eventually(probe: Callable[[], T | None], *, timeout_s: float, every_s: float) -> T:
    """Call ``probe`` every ``every_s`` until it returns something truthy (returned), or fail
    after ``timeout_s`` naming the last value."""
    deadline = time.monotonic() + timeout_s
    while True:
        last = probe()
        if last:
            return last
        if time.monotonic() > deadline:
            raise AssertionError(f"condition not met within {timeout_s}s (last: {last!r})")
        time.sleep(every_s)
