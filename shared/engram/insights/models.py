"""Team insights: per-user contributions (internal) and the aggregated rows a team admin reads.

A user's contribution is what the maintenance job read from their facts at their current
(decayed) confidence: each tool they have an affinity for or avoid, each domain they prefer.
Contributions are personal data (derived from behaviour): only the job writes them, erasure
deletes them, and no API returns them. What the API returns are the team's aggregates, each
row only when at least ``min_users`` distinct users of the team contribute to it.
"""

from __future__ import annotations

from dataclasses import dataclass
from datetime import datetime
from typing import Literal

from engram.behaviour.models import Fact, FactCategory

ContributionKind = Literal["tool_affinity", "tool_avoidance", "domain_preference"]
#: the categories a team aggregates (the insights API's tools and domains; entities and any
#: registered category are never aggregated): each is the contribution kind of its name
_KINDS: dict[str, ContributionKind] = {
    FactCategory.TOOL_AFFINITY: "tool_affinity",
    FactCategory.TOOL_AVOIDANCE: "tool_avoidance",
    FactCategory.DOMAIN_PREFERENCE: "domain_preference",
}
#: confidences are published rounded to this many decimals (coarser figures leak less)
CONFIDENCE_DECIMALS = 2


@dataclass(frozen=True, slots=True)
class Contribution:
    """One fact of one user, as the aggregation counts it."""

    kind: ContributionKind
    subject: str  # the tool or the domain
    confidence: float


def contributions(facts: list[Fact], current: list[float], threshold: float) -> list[Contribution]:
    """A user's contributions: their tool and domain facts whose current confidence (``current``,
    one per fact) is at least ``threshold`` (the expiry threshold: expired facts count for
    nothing)."""
    out = []
    for fact, confidence in zip(facts, current, strict=True):
        kind = _KINDS.get(fact.category)
        if kind is None or confidence < threshold:
            continue
        prefix = f"{fact.category}:"
        subject = fact.subject[len(prefix) :] if fact.subject.startswith(prefix) else fact.subject
        if subject:
            out.append(Contribution(kind, subject, confidence))
    return out


@dataclass(frozen=True, slots=True)
class ToolInsight:
    """One tool in a team: how many users have an affinity for it, how many avoid it, and the
    mean current confidence of each group (``None`` while that group has fewer than the
    minimum users, so no small group's figure is shown)."""

    tool: str
    users: int
    users_with_affinity: int
    users_with_avoidance: int
    mean_affinity_confidence: float | None
    mean_avoidance_confidence: float | None


@dataclass(frozen=True, slots=True)
class DomainInsight:
    domain: str
    users: int
    mean_confidence: float


@dataclass(frozen=True, slots=True)
class InsightsPage:
    """What the team's last aggregation published (``aggregated_at`` None: never)."""

    aggregated_at: datetime | None
    min_users: int
    tools: list[ToolInsight]
    domains: list[DomainInsight]
