"""Property: however the budget cuts the runs, one cycle visits every identity exactly once."""

from __future__ import annotations

from hypothesis import given, settings
from hypothesis import strategies as st
from tests.unit.maintenance.fakes import DAY
from tests.unit.maintenance.test_job import T0, Harness


@settings(max_examples=60, deadline=None)
@given(
    n=st.integers(min_value=0, max_value=40),
    page_size=st.integers(min_value=1, max_value=7),
    cost_ms=st.integers(min_value=1, max_value=1000),
    steps_per_run=st.integers(min_value=2, max_value=15),
    cap=st.integers(min_value=1, max_value=50),
)
def test_runs_cut_by_budget_or_cap_cover_each_identity_once_per_cycle(
    n: int, page_size: int, cost_ms: int, steps_per_run: int, cap: int
) -> None:
    h = Harness(spend_ms=cost_ms, page_size=page_size, max_identities_per_run=cap)
    ids = [f"t1:u{i:03d}" for i in range(n)]
    for i, ident in enumerate(ids):
        h.behaviour.add(ident, last_active=T0 - DAY + i, observations=[T0 - 40 * DAY, T0])

    for _ in range(10 * (n + 1)):
        report = h.run(remaining_ms=steps_per_run * cost_ms + cost_ms // 2)
        if report.tasks["prune"].completed_cycle:
            break
    else:
        raise AssertionError("the cycle never completed")

    assert h.behaviour.pruned == ids
    assert all(v.observations == [T0] for v in h.behaviour.ids.values())
    assert report.state.prune.cycle == 1
