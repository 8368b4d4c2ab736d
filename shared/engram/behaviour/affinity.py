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


def affinity_boost(affinity: float, *, factor: float = BOOST_FACTOR) -> float:
    """The catalogue ranking boost: affinity × factor (× 2 by default: at most +2 for a
    fully-confident fact)."""
    return affinity * factor


def boost_scores(
    scores: Mapping[str, float],
    affinities: Mapping[str, float],
    *,
    factor: float = BOOST_FACTOR,
) -> dict[str, float]:
    """Relevance scores of tools with the affinity boost added (a tiebreaker)."""
    return {
        tool: s + affinity_boost(affinities.get(tool, 0.0), factor=factor)
        for tool, s in scores.items()
    }


def rank_tools(
    scores: Mapping[str, float],
    affinities: Mapping[str, float],
    *,
    factor: float = BOOST_FACTOR,
) -> list[str]:
    """Tool names by boosted score, best first; equal scores keep the order of ``scores``."""
    boosted = boost_scores(scores, affinities, factor=factor)
    return sorted(boosted, key=lambda tool: -boosted[tool])
