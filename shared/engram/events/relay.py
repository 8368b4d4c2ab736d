"""``OutboxRelay``: publishes the outbox at least once, in order per aggregate.

One step claims the entries due (each aggregate's oldest unsent entry, leased), cuts them into
requests the bus accepts (``EventBus.max_entries`` entries and ``max_bytes`` bytes at most),
puts each request, and then marks every entry by its own result: accepted entries are sent,
refused ones retried with exponential backoff, and an entry refused ``max_attempts`` times is
dead (``events_dead`` metric, alarmed), so the aggregate's later events flow past it. A request
that fails as a whole (the bus is unreachable, throttles, times out) counts as a refusal of
every entry in it. An entry is marked sent only after the bus accepted it: a relay that dies in
between leaves it leased, and when the lease runs out it is sent again with the same event id,
the one consumers deduplicate on.

Because a claim takes at most one entry per aggregate, a memory's events are put in sequence
order: its next event is claimed only once the previous one was accepted or is dead.
"""

from __future__ import annotations

import logging
import time
from collections.abc import Callable, Iterator, Sequence
from dataclasses import dataclass, field, fields

from engram.batching import packed
from engram.clock import Clock, SystemClock
from engram.events.ports import EventBus, Outbox, OutboxEntry, OutboxStats, PutResult

log = logging.getLogger(__name__)

FIRST_BACKOFF_MS = 1_000
MAX_BACKOFF_MS = 300_000


def backoff_ms(attempts: int) -> int:
    """Wait before the next try after ``attempts`` refusals: 1 s, 2 s, 4 s, … at most 5 min."""
    return int(min(MAX_BACKOFF_MS, FIRST_BACKOFF_MS * 2 ** max(attempts - 1, 0)))


def requests(entries: Sequence[OutboxEntry], bus: EventBus) -> Iterator[list[OutboxEntry]]:
    """``entries`` in order, cut into requests within the bus's entry and byte limits."""
    return packed(
        entries, size_of=bus.entry_size, max_items=bus.max_entries, max_size=bus.max_bytes
    )


@dataclass
class RelayReport:
    sent: int = 0
    refused: int = 0
    dead: int = 0
    requests: int = 0
    pruned: int = 0
    errors: list[str] = field(default_factory=list)

    def add(self, other: RelayReport) -> None:
        """Add every count (and the errors) of ``other`` to this report's."""
        for name in (f.name for f in fields(self)):
            setattr(self, name, getattr(self, name) + getattr(other, name))


class OutboxRelay:
    def __init__(
        self,
        outbox: Outbox,
        bus: EventBus,
        *,
        clock: Clock | None = None,
        max_attempts: int = 10,
        lease_ms: int = 30_000,
        keep_sent_ms: int = 3_600_000,
        claim_limit: int = 100,
    ) -> None:
        self._outbox = outbox
        self._bus = bus
        self._clock = clock or SystemClock()
        self._max_attempts = max_attempts
        self._lease_ms = lease_ms
        self._keep_sent_ms = keep_sent_ms
        self._claim_limit = claim_limit

    def step(self) -> RelayReport:
        """Claim what is due once and publish it; nothing claimed: an empty report."""
        report = RelayReport()
        now = self._clock.now_ms()
        entries = self._outbox.claim(limit=self._claim_limit, lease_ms=self._lease_ms, now_ms=now)
        for batch in requests(entries, self._bus):
            report.requests += 1
            try:
                results: Sequence[PutResult] = self._bus.put(batch)
            except Exception as exc:  # the whole request failed: each entry was refused
                log.warning("event bus request failed", exc_info=True)
                error = f"{type(exc).__name__}: {str(exc)[:200]}"
                report.errors.append(error)
                results = [PutResult(e.event_id, accepted=False, error=error) for e in batch]
            self._settle(batch, results, report)
        return report

    def _settle(
        self, batch: list[OutboxEntry], results: Sequence[PutResult], report: RelayReport
    ) -> None:
        by_id = {r.event_id: r for r in results}
        now = self._clock.now_ms()
        accepted = [e.event_id for e in batch if by_id.get(e.event_id, _MISSING).accepted]
        if accepted:
            self._outbox.mark_sent(accepted, now_ms=now)
            report.sent += len(accepted)
        for entry in batch:
            result = by_id.get(entry.event_id, _MISSING)
            if result.accepted:
                continue
            attempts = entry.attempts + 1
            dead = attempts >= self._max_attempts
            self._outbox.mark_failed(
                entry.event_id,
                error=(result.error or "refused")[:500],
                retry_at_ms=now + backoff_ms(attempts),
                dead=dead,
                now_ms=now,
            )
            report.refused += 1
            if dead:
                report.dead += 1
                log.error(
                    "event refused %d times, now dead",
                    attempts,
                    extra={"eventId": entry.event_id, "eventType": entry.event_type},
                )

    def drain(self, *, max_steps: int = 1000) -> RelayReport:
        """Steps until one claims nothing (or ``max_steps``), then prunes sent entries."""
        total = RelayReport()
        for _ in range(max_steps):
            report = self.step()
            total.add(report)
            if report.requests == 0:
                break
        total.pruned = self.prune()
        return total

    def run(
        self,
        *,
        for_ms: int,
        poll_ms: int = 1000,
        sleep: Callable[[float], None] = time.sleep,
        monotonic: Callable[[], float] = time.monotonic,
    ) -> RelayReport:
        """Drain, then poll every ``poll_ms`` until ``for_ms`` have passed (one scheduled
        invocation of the relay function)."""
        deadline = monotonic() + for_ms / 1000
        total = RelayReport()
        while True:
            total.add(self.drain())
            left = deadline - monotonic()
            if left <= 0:
                return total
            sleep(min(poll_ms / 1000, left))

    def prune(self) -> int:
        now = self._clock.now_ms()
        pruned = 0
        while True:
            n = self._outbox.prune(sent_before_ms=now - self._keep_sent_ms, limit=1000)
            pruned += n
            if n < 1000:
                return pruned

    def stats(self) -> OutboxStats:
        return self._outbox.stats(now_ms=self._clock.now_ms())


_MISSING = PutResult("", accepted=False, error="no result for this entry")
