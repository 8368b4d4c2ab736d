"""Tool affinities: signs, the difference when both exist, and the x2 boost."""

from __future__ import annotations

import pytest

from engram import Fact, FactCategory, extract_tool_affinities
from engram.behaviour.affinity import affinity_boost, boost_scores, rank_tools


def fact(category: FactCategory, subject: str, confidence: float) -> Fact:
    return Fact(
        id=f"fact:{subject}",
        identity_id="t:u",
        category=category,
        subject=subject,
        content="x",
        confidence=confidence,
        reinforcement_count=1,
        last_reinforced_at=0,
        created_at=0,
        updated_at=0,
    )


def test_affinity_is_positive_avoidance_negative_and_both_give_the_difference() -> None:
    facts = [
        fact(FactCategory.TOOL_AFFINITY, "tool_affinity:good", 0.8),
        fact(FactCategory.TOOL_AVOIDANCE, "tool_avoidance:bad", 0.6),
        fact(FactCategory.TOOL_AFFINITY, "tool_affinity:mixed", 0.7),
        fact(FactCategory.TOOL_AVOIDANCE, "tool_avoidance:mixed", 0.5),
        fact(FactCategory.DOMAIN_PREFERENCE, "domain_preference:royalty", 0.9),
    ]
    aff = extract_tool_affinities(facts)
    assert aff == {"good": 0.8, "bad": -0.6, "mixed": pytest.approx(0.2)}


def test_tool_names_with_colons_survive() -> None:
    aff = extract_tool_affinities([fact(FactCategory.TOOL_AFFINITY, "tool_affinity:ns:tool", 1.0)])
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
