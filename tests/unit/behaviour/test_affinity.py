"""Tool affinities: signs, the difference when both exist, and the x2 boost."""

from __future__ import annotations

import pytest
from hypothesis import given
from hypothesis import strategies as st
from tests.support.facts import make_fact

from engram import Fact, extract_tool_affinities
from engram.behaviour.affinity import (
    MAX_REORDERED_GAP,
    affinity_boost,
    boost_scores,
    rank_candidates,
    rank_tools,
)


def fact(subject: str, confidence: float) -> Fact:
    return make_fact(subject, confidence=confidence)


def test_affinity_is_positive_avoidance_negative_and_both_give_the_difference() -> None:
    facts = [
        fact("tool_affinity:good", 0.8),
        fact("tool_avoidance:bad", 0.6),
        fact("tool_affinity:mixed", 0.7),
        fact("tool_avoidance:mixed", 0.5),
        fact("domain_preference:royalty", 0.9),
    ]
    aff = extract_tool_affinities(facts)
    assert aff == {"good": 0.8, "bad": -0.6, "mixed": pytest.approx(0.2)}


def test_tool_names_with_colons_survive() -> None:
    aff = extract_tool_affinities([fact("tool_affinity:ns:tool", 1.0)])
    assert aff == {"ns:tool": 1.0}


def test_boost_is_affinity_times_two() -> None:
    assert affinity_boost(1.0) == 2.0
    assert affinity_boost(-0.5) == -1.0
    assert boost_scores({"a": 3.0, "b": 3.0}, {"a": 0.5}) == {"a": 4.0, "b": 3.0}


def test_boost_factor_is_a_parameter_and_ranking_orders_by_boosted_score() -> None:
    assert affinity_boost(0.5, factor=4.0) == 2.0
    assert boost_scores({"a": 1.0}, {"a": -0.5}, factor=0.5) == {"a": 0.75}
    scores = {"a": 3.0, "b": 2.5, "c": 2.5, "d": 0.0}
    # b overtakes a only with a large enough boost; c and d tie-break by input order
    assert rank_tools(scores, {"b": 0.2}) == ["a", "b", "c", "d"]
    assert rank_tools(scores, {"b": 0.2}, factor=4.0) == ["b", "a", "c", "d"]
    assert rank_tools(scores, {"a": -1.0}) == ["b", "c", "a", "d"]
    assert rank_tools({"x": 1.0, "y": 1.0}, {}) == ["x", "y"]


# --- ranking a catalogue ---------------------------------------------------------------------
scores = st.floats(min_value=-1e6, max_value=1e6, allow_nan=False)
affinities = st.floats(min_value=-5.0, max_value=5.0, allow_nan=False)  # clamped to [-1, 1]


@given(a=scores, gap=st.floats(min_value=4.0001, max_value=1e3), aff_a=affinities, aff_b=affinities)
def test_a_gap_larger_than_four_is_never_reordered(
    a: float, gap: float, aff_a: float, aff_b: float
) -> None:
    b = a - gap  # the less relevant tool, first in the request and with the best affinity
    ranked = rank_candidates([("b", b), ("a", a)], {"a": aff_a, "b": aff_b})
    assert [t.name for t in ranked] == ["a", "b"]
    assert all(-1.0 <= t.affinity <= 1.0 for t in ranked)
    assert MAX_REORDERED_GAP == 4.0


def test_smaller_gaps_are_reordered_by_affinity() -> None:
    candidates = [("search_docs", 5.0), ("get_account", 4.2), ("run_sql", 3.5)]
    assert [t.name for t in rank_candidates(candidates, {})] == [c[0] for c in candidates]
    ranked = rank_candidates(candidates, {"get_account": 0.5, "run_sql": 1.0})
    assert [(t.name, t.affinity, t.boosted_score) for t in ranked] == [
        ("run_sql", 1.0, 5.5),
        ("get_account", 0.5, 5.2),
        ("search_docs", 0.0, 5.0),
    ]


def test_avoidance_pushes_a_failing_tool_down() -> None:
    candidates = [("run_sql", 6.0), ("get_account", 5.0), ("search_docs", 4.5)]
    ranked = rank_candidates(candidates, {"run_sql": -0.8})
    assert [t.name for t in ranked] == ["get_account", "search_docs", "run_sql"]
    assert ranked[-1].boosted_score == pytest.approx(4.4)


def test_equal_boosted_scores_keep_the_candidates_order() -> None:
    ranked = rank_candidates([("x", 1.0), ("y", 3.0), ("z", 1.0)], {"y": -1.0})
    assert [t.name for t in ranked] == ["x", "y", "z"]
