"""The relay over an in-memory outbox and bus: request limits, per-entry results, backoff,
dead entries, order per aggregate, leases and pruning."""

from __future__ import annotations

from collections import defaultdict

import pytest
from tests.unit.events.fakes import FakeBus, FakeOutbox

from engram.clock import FakeClock
from engram.events.relay import OutboxRelay, backoff_ms


class Crash(BaseException):
    """The relay's process dying (not an error it could handle)."""


def relay(outbox: FakeOutbox, bus: FakeBus, clock: FakeClock, **kw: int) -> OutboxRelay:
    return OutboxRelay(outbox, bus, clock=clock, **kw)


def in_order(delivered: list[dict[str, object]]) -> bool:
    last: dict[object, int] = defaultdict(int)
    for d in delivered:
        seq = d["sequence"]
        assert isinstance(seq, int)
        if seq <= last[d["aggregate"]]:
            return False
        last[d["aggregate"]] = seq
    return True


def test_requests_hold_at_most_ten_entries_and_256_kb() -> None:
    clock, outbox, bus = FakeClock(), FakeOutbox(), FakeBus()
    ids = [outbox.add(f"m{i}", now_ms=clock.now_ms()) for i in range(25)]
    big = [outbox.add(f"b{i}", now_ms=clock.now_ms(), size=100_000) for i in range(5)]
    report = relay(outbox, bus, clock).drain()
    assert report.sent == 30
    assert [d["eventId"] for d in bus.delivered] == ids + big
    assert all(len(r) <= 10 for r in bus.requests)
    # ten entries at most; two 100 kB entries fit in a request, a third would pass 256 kB
    assert [len(r) for r in bus.requests] == [10, 10, 7, 2, 1]


def test_a_partial_failure_resends_only_the_refused_entries() -> None:
    clock, outbox, bus = FakeClock(), FakeOutbox(), FakeBus()
    ids = [outbox.add(f"m{i}", now_ms=clock.now_ms()) for i in range(5)]
    bus.refuse = {ids[1]: 1, ids[3]: 1}
    r = relay(outbox, bus, clock)
    first = r.drain()
    assert (first.sent, first.refused) == (3, 2)
    clock.advance(ms=backoff_ms(1))
    second = r.drain()
    assert second.sent == 2
    assert bus.requests == [ids, [ids[1], ids[3]]]
    assert sorted(d["eventId"] for d in bus.delivered) == sorted(ids)  # each once


def test_an_unreachable_bus_is_retried_with_backoff_until_it_accepts() -> None:
    clock, outbox, bus = FakeClock(), FakeOutbox(), FakeBus(down=True)
    ids = [outbox.add("m", now_ms=clock.now_ms()) for _ in range(3)]
    r = relay(outbox, bus, clock)
    waits = []
    for attempt in range(1, 5):
        assert r.drain().sent == 0
        assert r.drain().requests == 0  # backing off: nothing is due yet
        waits.append(backoff_ms(attempt))
        clock.advance(ms=backoff_ms(attempt))
    assert waits == [1000, 2000, 4000, 8000]
    bus.down = False
    assert r.drain().sent == 3
    assert [d["eventId"] for d in bus.delivered] == ids


def test_a_memory_s_events_go_out_in_sequence_order_while_its_head_is_refused() -> None:
    clock, outbox, bus = FakeClock(), FakeOutbox(), FakeBus()
    a = [outbox.add("a", now_ms=clock.now_ms()) for _ in range(3)]
    b = [outbox.add("b", now_ms=clock.now_ms()) for _ in range(3)]
    bus.refuse = {a[0]: 2}
    r = relay(outbox, bus, clock)
    r.drain()
    # b flowed; a's later events waited behind its refused first one
    assert [d["eventId"] for d in bus.delivered] == b
    for attempt in (1, 2):
        clock.advance(ms=backoff_ms(attempt))
        r.drain()
    assert [d["eventId"] for d in bus.delivered] == b + a
    assert in_order(bus.delivered)
    assert all(len({i[0] for i in req}) == len(req) for req in bus.requests)  # one per memory


def test_an_entry_refused_max_attempts_times_is_dead_and_later_events_flow() -> None:
    clock, outbox, bus = FakeClock(), FakeOutbox(), FakeBus()
    first, second, third = (outbox.add("a", now_ms=clock.now_ms()) for _ in range(3))
    bus.refuse = {first: -1}
    r = relay(outbox, bus, clock, max_attempts=3)
    deaths = 0
    for attempt in range(1, 4):
        deaths += r.drain().dead
        clock.advance(ms=backoff_ms(attempt))
    assert deaths == 1
    assert outbox.state(first) == "dead"
    assert [d["eventId"] for d in bus.delivered] == [second, third]
    assert r.stats().dead == 1
    assert r.stats().pending == 0


def test_a_relay_that_dies_after_the_put_is_replaced_when_its_lease_ends() -> None:
    clock, outbox, bus = FakeClock(), FakeOutbox(), FakeBus()
    ids = [outbox.add(f"m{i}", now_ms=clock.now_ms()) for i in range(3)]

    class DyingBus(FakeBus):
        def put(self, entries):  # type: ignore[no-untyped-def]
            super().put(entries)
            raise Crash

    dying = DyingBus()
    with pytest.raises(Crash):
        relay(outbox, dying, clock, lease_ms=30_000).step()
    assert [d["eventId"] for d in dying.delivered] == ids  # the bus had them
    successor = relay(outbox, bus, clock, lease_ms=30_000)
    assert successor.drain().requests == 0  # still leased by the dead relay
    clock.advance(seconds=30)
    assert successor.drain().sent == 3
    assert [d["eventId"] for d in bus.delivered] == ids  # the same ids again


def test_sent_entries_are_pruned_after_the_keep_time() -> None:
    clock, outbox, bus = FakeClock(), FakeOutbox(), FakeBus()
    for i in range(3):
        outbox.add(f"m{i}", now_ms=clock.now_ms())
    r = relay(outbox, bus, clock, keep_sent_ms=60_000)
    assert r.drain().pruned == 0
    assert len(outbox.rows) == 3
    clock.advance(seconds=61)
    assert r.drain().pruned == 3
    assert outbox.rows == {}


def test_run_polls_until_its_time_is_up() -> None:
    clock, outbox, bus = FakeClock(), FakeOutbox(), FakeBus()
    now = [0.0]
    slept: list[float] = []

    def sleep(s: float) -> None:
        slept.append(s)
        now[0] += s
        if len(slept) == 2:
            outbox.add("late", now_ms=clock.now_ms())

    report = relay(outbox, bus, clock).run(
        for_ms=5000, poll_ms=1000, sleep=sleep, monotonic=lambda: now[0]
    )
    assert slept == [1.0] * 5
    assert report.sent == 1  # the event written while it polled
