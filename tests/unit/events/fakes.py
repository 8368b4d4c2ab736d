"""An in-memory outbox and bus with the semantics of the PostgreSQL outbox (claims one entry
per aggregate, leased) and of EventBridge (per-entry results)."""

from __future__ import annotations

import itertools
from collections.abc import Sequence
from dataclasses import dataclass, field
from typing import Any

from engram.events.ports import OutboxEntry, OutboxStats, PutResult


@dataclass
class Row:
    entry: OutboxEntry
    aggregate: str
    sequence: int
    created_ms: int
    state: str = "pending"
    next_ms: int = 0
    leased_until: int | None = None
    sent_ms: int | None = None
    error: str | None = None


class FakeOutbox:
    def __init__(self) -> None:
        self.rows: dict[str, Row] = {}
        self._pos = itertools.count(1)
        self._seq: dict[str, int] = {}

    def add(self, aggregate: str, *, now_ms: int = 0, size: int = 0) -> str:
        seq = self._seq[aggregate] = self._seq.get(aggregate, 0) + 1
        event_id = f"{aggregate}#{seq}"
        detail: dict[str, Any] = {"eventId": event_id, "aggregate": aggregate, "sequence": seq}
        if size:
            detail["pad"] = "x" * size
        entry = OutboxEntry(event_id, "memory.saved", detail, 0, next(self._pos))
        self.rows[event_id] = Row(entry, aggregate, seq, now_ms, next_ms=now_ms)
        return event_id

    def claim(self, *, limit: int, lease_ms: int, now_ms: int) -> Sequence[OutboxEntry]:
        heads: dict[str, Row] = {}
        for row in sorted(self.rows.values(), key=lambda r: r.sequence):
            if row.state == "pending" and row.aggregate not in heads:
                heads[row.aggregate] = row
        due = [
            r
            for r in sorted(heads.values(), key=lambda r: r.entry.position)
            if r.next_ms <= now_ms and (r.leased_until is None or r.leased_until <= now_ms)
        ][:limit]
        for r in due:
            r.leased_until = now_ms + lease_ms
        return [r.entry for r in due]

    def mark_sent(self, event_ids: Sequence[str], *, now_ms: int) -> None:
        for i in event_ids:
            row = self.rows[i]
            row.state, row.sent_ms, row.leased_until = "sent", now_ms, None

    def mark_failed(
        self, event_id: str, *, error: str, retry_at_ms: int, dead: bool, now_ms: int
    ) -> None:
        row = self.rows[event_id]
        if row.state != "pending":
            return
        e = row.entry
        row.entry = OutboxEntry(e.event_id, e.event_type, e.detail, e.attempts + 1, e.position)
        row.error, row.next_ms, row.leased_until = error, retry_at_ms, None
        row.state = "dead" if dead else "pending"

    def prune(self, *, sent_before_ms: int, limit: int) -> int:
        gone = [
            i
            for i, r in self.rows.items()
            if r.state == "sent" and r.sent_ms is not None and r.sent_ms < sent_before_ms
        ][:limit]
        for i in gone:
            del self.rows[i]
        return len(gone)

    def stats(self, *, now_ms: int) -> OutboxStats:
        pending = [r for r in self.rows.values() if r.state == "pending"]
        dead = sum(r.state == "dead" for r in self.rows.values())
        oldest = min((r.created_ms for r in pending), default=now_ms)
        return OutboxStats(len(pending), dead, (now_ms - oldest) / 1000)

    def state(self, event_id: str) -> str:
        return self.rows[event_id].state


@dataclass
class FakeBus:
    """Accepts everything except: ``refuse`` (event id -> times left to refuse; -1: always),
    and whole requests while ``down``."""

    max_entries: int = 10
    max_bytes: int = 256 * 1024
    refuse: dict[str, int] = field(default_factory=dict)
    down: bool = False
    requests: list[list[str]] = field(default_factory=list)
    delivered: list[dict[str, Any]] = field(default_factory=list)

    def entry_size(self, entry: OutboxEntry) -> int:
        return len(str(entry.detail))

    def put(self, entries: Sequence[OutboxEntry]) -> Sequence[PutResult]:
        assert len(entries) <= self.max_entries
        assert sum(self.entry_size(e) for e in entries) <= self.max_bytes
        self.requests.append([e.event_id for e in entries])
        if self.down:
            raise ConnectionError("bus unreachable")
        out = []
        for e in entries:
            left = self.refuse.get(e.event_id, 0)
            if left:
                self.refuse[e.event_id] = left - 1 if left > 0 else -1
                out.append(PutResult(e.event_id, accepted=False, error="InternalFailure"))
            else:
                self.delivered.append(e.detail)
                out.append(PutResult(e.event_id, accepted=True))
        return out
