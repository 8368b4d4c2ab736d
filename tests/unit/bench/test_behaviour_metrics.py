"""The behaviour simulator's metric code on hand-computed cases (no Engram, no Redis)."""

from __future__ import annotations

import math
from typing import Any

import pytest
from bench.behaviour import metrics
from bench.behaviour.engine import PromptRecord, SessionRecord, TaskRecord, prompt_subjects
from bench.behaviour.world import Profile, truth_of

DAY = 86_400_000
T0 = 1_767_225_600_000


def record(
    user: int,
    index: int,
    day: float,
    *,
    tasks: tuple[TaskRecord, ...] = (),
    labels: tuple[str, ...] = (),
    core_shown: int = 0,
    core_size: int = 4,
    after_change: bool = False,
    change_top: str | None = None,
    move_prompt: tuple[bool, bool] | None = None,
    flaky: dict[str, float | None] | None = None,
) -> SessionRecord:
    return SessionRecord(
        user=user,
        index=index,
        at_ms=int(T0 + day * DAY),
        day=int(day),
        days_in=day,
        after_change=after_change,
        tasks=tasks,
        prompts={"seed": PromptRecord(labels=labels, core_shown=core_shown)},
        core_size=core_size,
        core_known=core_shown,
        change_top=change_top,
        move_prompt=move_prompt,
        flaky=flaky or {},
    )


def test_ndcg_and_top1_by_hand() -> None:
    # ranking gains 0, 2, 1 (the wanted tool second, a working alternative third)
    gains, ideal = (0, 2, 1, 0, 0), (2, 1, 0, 0, 0, 0)
    dcg = 0 + 3 / math.log2(3) + 1 / math.log2(4)  # 2.392789
    idcg = 3 / math.log2(2) + 1 / math.log2(3)  # 3.63093
    assert metrics.dcg(gains) == pytest.approx(2.392789, abs=1e-6)
    assert metrics.ndcg(gains, ideal) == pytest.approx(dcg / idcg)
    assert metrics.ndcg(gains, ideal) == pytest.approx(0.659002, abs=1e-6)
    assert metrics.ndcg((2, 1, 0, 0, 0), ideal) == 1.0
    assert metrics.ndcg((0, 0, 0, 0, 0), (0,) * 6) == 0.0
    assert metrics.top1(gains) == 0.0
    assert metrics.top1((2, 0)) == 1.0
    # only the first five ranks count
    assert metrics.dcg((0, 0, 0, 0, 0, 2)) == 0.0


def test_prompt_precision_ignores_incidental_facts_and_recall_counts_core() -> None:
    r = record(0, 0, 0, labels=("core", "false", "incidental", "core"), core_shown=2, core_size=5)
    assert metrics.prompt_precision(r.prompts["seed"].labels) == pytest.approx(2 / 3)
    assert metrics.prompt_recall(r) == pytest.approx(0.4)
    assert metrics.prompt_precision(("incidental",)) is None
    assert metrics.prompt_recall(record(0, 0, 0, core_size=0)) is None


def test_user_means_and_margin_are_per_user_then_over_users() -> None:
    hit = TaskRecord(gains=(2, 0), base_gains=(0, 2), ideal=(2, 0), calls=1)
    miss = TaskRecord(gains=(0, 2), base_gains=(0, 2), ideal=(2, 0), calls=2)
    records = [
        record(0, 0, 1.0, tasks=(miss,)),  # first week: left out below
        record(0, 1, 8.0, tasks=(hit, hit, miss)),  # user 0: memory 2/3, none 0
        record(1, 0, 9.0, tasks=(hit,)),  # user 1: memory 1, none 0
    ]
    means = metrics.user_means(records, min_days_in=7)
    assert means["top1Memory"] == {0: pytest.approx(2 / 3), 1: 1.0}
    assert means["top1None"] == {0: 0.0, 1: 0.0}
    out = metrics.summary(records, seed=1, min_days_in=7)
    assert out["top1"]["margin"]["mean"] == pytest.approx((2 / 3 + 1) / 2, abs=1e-4)
    assert out["top1"]["margin"]["n"] == 2
    # every task without memory: the wanted tool second, (3 / log2 3) / 3 = 0.6309
    assert out["ndcg5"]["none"]["mean"] == pytest.approx(1 / math.log2(3), abs=1e-4)


def test_bootstrap_of_a_constant_has_no_width_and_is_reproducible() -> None:
    assert metrics.bootstrap([0.25] * 10, seed=3) == {"mean": 0.25, "lo": 0.25, "hi": 0.25, "n": 10}
    values = [0.0, 1.0] * 20
    first = metrics.bootstrap(values, seed=7)
    assert first == metrics.bootstrap(values, seed=7)
    assert first["lo"] < 0.5 < first["hi"]
    assert metrics.paired({1: 1.0, 2: 0.5, 3: 9.0}, {1: 0.5, 2: 0.5}, seed=1)["mean"] == 0.25


def test_settle_is_the_first_index_from_which_it_holds_for_good() -> None:
    assert metrics.settle([False, True, False, True, True]) == 3
    assert metrics.settle([True, True]) == 0
    assert metrics.settle([True, False]) is None
    assert metrics.settle([]) is None


def test_adaptation_counts_sessions_and_days_from_the_change() -> None:
    change_ms = T0 + 30 * DAY
    changes: dict[int, dict[str, Any]] = {
        0: {"kind": "switch", "atMs": change_ms, "abandoned": "a", "adopted": "b"},
        1: {"kind": "switch", "atMs": change_ms, "abandoned": "a", "adopted": "b"},
        2: {"kind": "move", "atMs": change_ms, "abandoned": "", "adopted": ""},
    }
    records = [
        record(0, 0, 29, change_top="a"),
        record(0, 1, 31, change_top="a", after_change=True),
        record(0, 2, 32, change_top="c", after_change=True),  # a dropped, b not yet first
        record(0, 3, 34, change_top="b", after_change=True),
        record(0, 4, 36, change_top="b", after_change=True),
        # user 1 never had "a" first: nothing to unlearn, not counted
        record(1, 0, 31, change_top="b", after_change=True),
        record(2, 0, 31, move_prompt=(True, False), after_change=True),
        record(2, 1, 33, move_prompt=(True, True), after_change=True),
        record(2, 2, 35, move_prompt=(False, True), after_change=True),
    ]
    out = metrics.adaptation(records, changes)
    switch = out["switch"]
    assert switch["users"] == 2
    assert switch["learned"] == 0.5
    assert switch["abandonedStopsSessions"] == {
        "n": 1,
        "adapted": 1.0,
        "median": 1.0,
        "p90": 1.0,
        "mean": 1.0,
    }
    assert switch["abandonedStopsDays"]["median"] == 2.0  # day 32 - day 30
    assert switch["adoptedStartsSessions"]["median"] == 2.0
    assert switch["adoptedStartsDays"]["median"] == 4.0
    assert out["break"]["users"] == 0
    move = out["move"]
    assert move["newDomainInPromptSessions"]["median"] == 1.0
    assert move["oldDomainLeavesPromptSessions"]["median"] == 2.0
    assert move["oldDomainLeavesPromptDays"]["median"] == 5.0


def test_distribution_counts_never_as_infinite() -> None:
    out = metrics._distribution([1.0, None, 3.0, None, None])
    assert out == {"n": 5, "adapted": 0.4, "median": None, "p90": None, "mean": 2.0}
    assert metrics._distribution([2.0, 4.0, None])["median"] == 4.0


def test_flaky_episodes_by_hand() -> None:
    values = [None, 0.2, 0.3, -0.1, 0.4]  # boosted on days 1-2, unboosted day 3, again day 4
    records = [record(0, i, i, flaky={"x": v}) for i, v in enumerate(values)]
    out = metrics.flaky_episodes(records)
    assert out["episodes"] == 2
    assert out["boostedShareOfKnown"] == 0.75  # 3 of the 4 sessions with a fact
    assert out["sessions"] == {"n": 2, "adapted": 0.5, "median": 2.0, "p90": None, "mean": 2.0}
    assert out["days"]["mean"] == 2.0  # from day 1 to day 3; the last one is censored


def test_prompt_lines_map_back_to_fact_subjects() -> None:
    section = "\n".join(
        [
            "## What you know about this user",
            "Tool preferences:",
            '- Tool "x" works well for this user (confidence 0.90)',
            "Domain focus:",
            '- Often asks about "royalty" (confidence 0.50)',
            "Use this ...",
        ]
    )
    by_content = {
        'Tool "x" works well for this user': "tool_affinity:x",
        'Often asks about "royalty"': "domain_preference:royalty",
    }
    assert prompt_subjects(section, by_content) == (
        "tool_affinity:x",
        "domain_preference:royalty",
    )
    with pytest.raises(ValueError, match="matches no fact"):
        prompt_subjects("- unknown (confidence 0.1)", by_content)


def test_true_profile_by_hand() -> None:
    profile = Profile(
        domains={"royalty": 1.0},
        tasks={"royalty": (0.6, 0.25, 0.15)},
        habits={
            ("royalty", 0): "royalty_report",
            ("royalty", 1): "royalty_summary",
            ("royalty", 2): "royalty_audit",
        },
        success={
            "royalty_report": 0.95,
            "royalty_search": 0.5,  # flaky, relevant to the main task
            "royalty_summary": 0.95,
            "royalty_export": 0.02,  # broken, relevant to task 1
            "royalty_audit": 0.95,
            "royalty_forecast": 0.95,
        },
        entities={"account": (0.85, 0.1, 0.05)},
    )
    truth = truth_of(profile, abandoned=frozenset({"royalty_forecast"}))
    # P(task in a session of 1-3 tasks): share 0.6 -> 0.73, 0.25 -> 0.37, 0.15 -> 0.23: all core
    for tool in ("royalty_report", "royalty_summary", "royalty_audit", "get_account"):
        assert truth.label(f"tool_affinity:{tool}") == "core"
    assert truth.label("tool_affinity:royalty_search") == "false"  # does not work well
    assert truth.label("tool_affinity:royalty_forecast") == "false"  # abandoned
    assert truth.label("tool_avoidance:royalty_search") == "core"
    assert truth.label("tool_avoidance:royalty_export") == "core"
    assert truth.label("tool_avoidance:royalty_report") == "false"
    assert truth.label("domain_preference:royalty") == "core"
    assert truth.label("domain_preference:revenue") == "false"
    assert truth.label("tool_affinity:revenue_report") == "false"  # a domain never used
    # one lookup type: P(visited) = 1 - E[(1 - w)^n] over 1-3 lookups: w 0.1 -> 0.17, 0.05 -> 0.09
    assert truth.label("entity_frequency:account:ACC-000") == "core"
    assert truth.label("entity_frequency:account:ACC-001") == "core"
    assert truth.label("entity_frequency:account:ACC-002") == "incidental"
