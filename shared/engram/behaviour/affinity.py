"""Tool affinities from facts, and the catalogue boost that ranks tools with them.

A tool's affinity is in [-1, 1]: the confidence of its ``tool_affinity`` fact minus that of
its ``tool_avoidance`` fact. Ranking adds ``affinity × 2`` to the relevance score the caller's
catalogue search gave each tool, so the boost moves a tool by at most 2 either way: it breaks
near-ties between relevant tools and never overrides relevance, since two tools whose scores
differ by more than 4 keep their order whatever their affinities. Scores are on the caller's
own relevance scale (as a catalogue search scores its matches); 2 is the boost's weight on it.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import dataclass

from engram.behaviour.models import Fact, FactCategory

BOOST_FACTOR = 2.0
#: the bounds of an affinity
MAX_AFFINITY = 1.0
#: the widest gap between two scores the boost can close (a larger one is never reordered)
MAX_REORDERED_GAP = 2 * MAX_AFFINITY * BOOST_FACTOR


@dataclass(frozen=True)
class RankedTool:
    """One candidate after ranking: its score, the affinity used and the boosted score."""

    name: str
    score: float
    affinity: float
    boosted_score: float


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


def rank_candidates(
    candidates: Sequence[tuple[str, float]],
    affinities: Mapping[str, float],
    *,
    factor: float = BOOST_FACTOR,
) -> list[RankedTool]:
    """``(name, score)`` candidates by ``score + factor × affinity``, best first; equal
    boosted scores keep the candidates' order. Affinities are clamped to [-1, 1]; a tool
    without one has 0."""
    ranked = []
    for name, score in candidates:
        affinity = max(-MAX_AFFINITY, min(MAX_AFFINITY, affinities.get(name, 0.0)))
        boosted = score + affinity_boost(affinity, factor=factor)
        ranked.append(RankedTool(name, score, affinity, boosted))
    return sorted(ranked, key=lambda tool: -tool.boosted_score)


def rank_tools(
    scores: Mapping[str, float],
    affinities: Mapping[str, float],
    *,
    factor: float = BOOST_FACTOR,
) -> list[str]:
    """Tool names by boosted score, best first; equal scores keep the order of ``scores``."""
    return [t.name for t in rank_candidates(list(scores.items()), affinities, factor=factor)]
