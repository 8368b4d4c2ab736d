"""The in-memory observation log on its own: ids pruned by the 7-day rule stay known until the
30-day limit (as in every behaviour store; their tests are in the store conformance suite)."""

from __future__ import annotations

from tests.support.observations import IDENTITY, MakeObs

from engram.adapters.inmemory_behaviour import InMemoryObservationLog
from engram.clock import MS_PER_DAY, FakeClock


def test_the_single_port_log_keeps_tombstones_until_the_hard_limit(
    clock: FakeClock, make_obs: MakeObs
) -> None:
    log = InMemoryObservationLog()
    now = clock.now_ms()
    old = make_obs("tool_success", "A", at=now - 10 * MS_PER_DAY)
    assert log.append(IDENTITY, [old, make_obs("tool_success", "B", at=now)]) == 2
    assert log.prune(IDENTITY, now - 7 * MS_PER_DAY, up_to_seq=2) == 1
    assert log.append(IDENTITY, [old]) == 0  # a redelivery of a pruned id
    assert log.append(old.identity_id + "-other", [old]) == 1  # per identity
    log.prune(IDENTITY, now - 11 * MS_PER_DAY)  # the hard limit, not reached yet
    assert log.append(IDENTITY, [old]) == 0
    log.prune(IDENTITY, now - 9 * MS_PER_DAY)  # past it: the tombstone goes
    assert log.append(IDENTITY, [old]) == 1
