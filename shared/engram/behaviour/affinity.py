"""Tool affinities from facts and the catalogue boost (seed §5, SPEC §2)."""

from __future__ import annotations

from collections.abc import Mapping, Sequence

from engram.behaviour.models import Fact, FactCategory

BOOST_FACTOR = 2.0


def extract_tool_affinities(facts: Sequence[Fact]) -> dict[str, float]:
    """``tool_affinity`` → +confidence, ``tool_avoidance`` → −confidence; both → difference."""
    out: dict[str, float] = {}
    for fact in facts:
        if fact.category is FactCategory.TOOL_AFFINITY:
            sign = 1.0
        elif fact.category is FactCategory.TOOL_AVOIDANCE:
            sign = -1.0
        else:
            continue
        tool = fact.subject.split(":", 1)[1]
        out[tool] = out.get(tool, 0.0) + sign * fact.confidence
    return out


def affinity_boost(affinity: float) -> float:
    """The catalogue ranking boost: affinity × 2 (at most +2 for a fully-confident fact)."""
    return affinity * BOOST_FACTOR


def boost_scores(scores: Mapping[str, float], affinities: Mapping[str, float]) -> dict[str, float]:
    """Relevance scores of tools with the affinity boost added (a tiebreaker)."""
    return {tool: s + affinity_boost(affinities.get(tool, 0.0)) for tool, s in scores.items()}
