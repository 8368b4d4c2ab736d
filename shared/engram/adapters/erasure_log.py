"""The erasure log (``engram.maintenance.ports.ErasureLog``): who was erased, and when.

``DELETE /v1/me`` records the erasure *before* deleting anything, so a transcript queued before
it (the extraction drain) or an observation delivered late (the maintenance purge) never brings
the user back. Kept in Redis under two global keys (not under the erased identity's hash tag,
so erasing the identity's keys never erases the record of the erasure):

* ``{prefix}:erasures:last`` — hash ``team\\x1fuser`` -> latest erasure time (epoch ms);
* ``{prefix}:erasures:pending`` — sorted set of ``[team, user, atMs]`` JSON members scored by
  the erasure time, removed by ``mark_purged``.

``InMemoryErasureLog`` is the same thing in a dict (unit tests, fakes).
"""

from __future__ import annotations

import json
import threading
from collections.abc import Sequence
from typing import Any

from engram.maintenance.models import ErasureRecord

_SEP = "\x1f"


def _field(team_id: str, user_id: str) -> str:
    return f"{team_id}{_SEP}{user_id}"


def _text(value: Any) -> str:
    return value.decode("utf-8") if isinstance(value, bytes) else str(value)


class RedisErasureLog:
    def __init__(self, client: Any, *, prefix: str = "engram") -> None:
        self.client = client
        self.last_key = f"{prefix}:erasures:last"
        self.pending_key = f"{prefix}:erasures:pending"

    def record(self, team_id: str, user_id: str, at_ms: int) -> None:
        member = json.dumps([team_id, user_id, at_ms], separators=(",", ":"))
        pipe = self.client.pipeline(transaction=True)
        pipe.hset(self.last_key, _field(team_id, user_id), str(at_ms))
        pipe.zadd(self.pending_key, {member: at_ms})
        pipe.execute()

    def erased_since(self, team_id: str, user_id: str, since_ms: int) -> bool:
        raw = self.client.hget(self.last_key, _field(team_id, user_id))
        return raw is not None and int(_text(raw)) >= since_ms

    def pending_purges(
        self, *, after: tuple[int, str, str] | None, limit: int
    ) -> Sequence[ErasureRecord]:
        low: int | str = "-inf" if after is None else after[0]
        rows = self.client.zrangebyscore(self.pending_key, low, "+inf")
        records = []
        for row in rows:
            team, user, at = json.loads(_text(row))
            rec = ErasureRecord(team_id=team, user_id=user, erased_at_ms=int(at))
            if after is None or rec.key > after:
                records.append(rec)
        records.sort(key=lambda r: r.key)
        return records[:limit]

    def mark_purged(self, team_id: str, user_id: str, at_ms: int) -> None:
        member = json.dumps([team_id, user_id, at_ms], separators=(",", ":"))
        self.client.zrem(self.pending_key, member)


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
