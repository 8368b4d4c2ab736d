"""One maintenance run at a time (``engram.maintenance.lease``): the lease, the schedules of
skipped runs, and what happens when the lease store is down."""

from __future__ import annotations

import pytest
from tests.unit.maintenance.fakes import FakeLease

from engram.maintenance.lease import run_serialised, widest


def test_a_free_lease_is_taken_for_the_run_and_given_back() -> None:
    lease = FakeLease()
    seen: list[str | None] = []

    def run(schedule: str) -> str:
        seen.append(lease.holder)
        return f"ran {schedule}"

    outcome = run_serialised(lease, schedule="frequent", ttl_ms=310_000, run=run)
    assert outcome.lease == "held"
    assert outcome.result == "ran frequent"
    assert not outcome.skipped
    assert seen == ["token-1"]  # held while running
    assert lease.ttls == [310_000]
    assert lease.holder is None
    assert lease.released == ["token-1"]


def test_a_run_that_finds_the_lease_taken_does_nothing_and_leaves_its_schedule() -> None:
    lease = FakeLease()
    lease.holder = "someone-else"
    calls: list[str] = []
    outcome = run_serialised(lease, schedule="daily", ttl_ms=1000, run=calls.append)
    assert outcome.skipped
    assert outcome.result is None
    assert calls == []
    assert lease.holder == "someone-else"  # untouched
    assert lease.pending == {"daily"}


def test_the_next_holder_runs_the_widest_pending_schedule() -> None:
    lease = FakeLease()
    lease.holder = "long-frequent-run"
    run_serialised(lease, schedule="daily", ttl_ms=1000, run=lambda s: s)
    lease.holder = None  # the long run ended
    outcome = run_serialised(lease, schedule="frequent", ttl_ms=1000, run=lambda s: s)
    assert outcome.schedule == "daily"
    assert outcome.result == "daily"
    assert lease.pending == set()
    # nothing pending any more: the next frequent run is frequent again
    assert run_serialised(lease, schedule="frequent", ttl_ms=1000, run=lambda s: s).schedule == (
        "frequent"
    )


@pytest.mark.parametrize(
    ("schedules", "expected"),
    [
        ({"frequent"}, "frequent"),
        ({"frequent", "daily"}, "daily"),
        ({"all"}, "all"),
        ({"daily", "all", "frequent"}, "all"),
    ],
)
def test_widest(schedules: set[str], expected: str) -> None:
    assert widest(schedules) == expected


def test_the_lease_is_given_back_when_the_run_raises() -> None:
    lease = FakeLease()

    def boom(schedule: str) -> None:
        raise RuntimeError("job could not be built")

    with pytest.raises(RuntimeError, match="could not be built"):
        run_serialised(lease, schedule="frequent", ttl_ms=1000, run=boom)
    assert lease.holder is None


def test_without_a_reachable_lease_store_the_run_goes_ahead() -> None:
    lease = FakeLease()
    lease.down = True
    outcome = run_serialised(lease, schedule="daily", ttl_ms=1000, run=lambda s: f"ran {s}")
    assert outcome.lease == "unavailable"
    assert outcome.result == "ran daily"


def test_a_failed_release_is_not_the_runs_failure() -> None:
    lease = FakeLease()

    def run(schedule: str) -> str:
        lease.down = True  # the store goes away during the run
        return "done"

    outcome = run_serialised(lease, schedule="frequent", ttl_ms=1000, run=run)
    assert outcome.result == "done"
    assert lease.holder == "token-1"  # left to expire by its TTL
