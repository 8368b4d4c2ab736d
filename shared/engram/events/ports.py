"""Ports of the event relay: the outbox it reads and the bus it publishes to."""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass
from typing import Any, Protocol


@dataclass(frozen=True, slots=True)
class OutboxEntry:
    """One event waiting in the outbox. ``position`` orders entries as they were written."""

    event_id: str
    event_type: str
    detail: dict[str, Any]
    attempts: int
    position: int


@dataclass(frozen=True, slots=True)
class PutResult:
    """A bus's answer for one entry: accepted, or refused with the bus's error code."""

    event_id: str
    accepted: bool
    error: str | None = None


@dataclass(frozen=True, slots=True)
class OutboxStats:
    pending: int
    dead: int
    oldest_pending_age_s: float


class Outbox(Protocol):
    """The transactional outbox (written by the stores in the transaction of each change)."""

    def claim(self, *, limit: int, lease_ms: int, now_ms: int) -> Sequence[OutboxEntry]:
        """Up to ``limit`` entries due now, at most one per aggregate: each aggregate's
        oldest unsent entry, and only while no other relay's lease holds it. Claimed entries
        are leased for ``lease_ms``: a relay that dies before marking them is replaced when
        the lease runs out, and the entries are sent again with the same event id."""
        ...

    def mark_sent(self, event_ids: Sequence[str], *, now_ms: int) -> None: ...

    def mark_failed(
        self, event_id: str, *, error: str, retry_at_ms: int, dead: bool, now_ms: int
    ) -> None:
        """Count a refused attempt; retry at ``retry_at_ms`` or (``dead``) stop trying, which
        frees the aggregate's later entries."""
        ...

    def prune(self, *, sent_before_ms: int, limit: int) -> int:
        """Delete up to ``limit`` entries sent before ``sent_before_ms``; how many."""
        ...

    def stats(self, *, now_ms: int) -> OutboxStats: ...


class EventBus(Protocol):
    """Where events go (EventBridge, or locally a JSONL file and an optional webhook)."""

    #: most entries one ``put`` takes
    max_entries: int
    #: most bytes of entries one ``put`` takes (``entry_size``)
    max_bytes: int

    def entry_size(self, entry: OutboxEntry) -> int: ...

    def put(self, entries: Sequence[OutboxEntry]) -> Sequence[PutResult]:
        """Publish ``entries``; one result per entry, in order. Raises when the bus could
        not be reached or refused the whole request (every entry is then retried)."""
        ...
