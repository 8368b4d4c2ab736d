"""An in-memory erasure log (``engram.maintenance.ports.ErasureLog``) for unit tests and fakes.

The service's erasure log is on PostgreSQL: ``engram.adapters.postgres.erasures
.PostgresErasureLog`` (the composition root wires it).
"""

from __future__ import annotations

import threading
from collections.abc import Sequence

from engram.maintenance.models import ErasureRecord


class InMemoryErasureLog:
    def __init__(self) -> None:
        self._last: dict[tuple[str, str], int] = {}
        self._pending: set[tuple[int, str, str]] = set()
        self._lock = threading.Lock()

    def record(self, team_id: str, user_id: str, at_ms: int) -> None:
        with self._lock:
            key = (team_id, user_id)
            self._last[key] = max(at_ms, self._last.get(key, at_ms))
            self._pending.add((at_ms, team_id, user_id))

    def erased_since(self, team_id: str, user_id: str, since_ms: int) -> bool:
        with self._lock:
            last = self._last.get((team_id, user_id))
        return last is not None and last >= since_ms

    def pending_purges(
        self, *, after: tuple[int, str, str] | None, limit: int
    ) -> Sequence[ErasureRecord]:
        with self._lock:
            keys = sorted(k for k in self._pending if after is None or k > after)
        return [ErasureRecord(team_id=t, user_id=u, erased_at_ms=a) for a, t, u in keys[:limit]]

    def mark_purged(self, team_id: str, user_id: str, at_ms: int) -> None:
        with self._lock:
            self._pending.discard((at_ms, team_id, user_id))
