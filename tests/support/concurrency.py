"""Release calls together, to race them against each other."""

from __future__ import annotations

import threading
from collections.abc import Callable
from typing import Any


def race(*calls: Callable[[], Any]) -> list[Any]:
    """Run ``calls`` in threads released together by a barrier; each call's result or the
    exception it raised, in order."""
    barrier = threading.Barrier(len(calls))
    results: list[Any] = [None] * len(calls)

    def run(i: int, call: Callable[[], Any]) -> None:
        barrier.wait()
        try:
            results[i] = call()
        except Exception as exc:
            results[i] = exc

    threads = [threading.Thread(target=run, args=(i, c)) for i, c in enumerate(calls)]
    for t in threads:
        t.start()
    for t in threads:
        t.join(timeout=30)
    return results
