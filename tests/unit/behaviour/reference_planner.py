"""The reference consolidation planner: steps 4-7 of a round written plainly, through the
``DecayStrategy`` methods only, on copies (it never changes what it was given). The
production planner (``engram.behaviour.consolidation.plan_round``: facts updated in place,
the built-in decays' numbers inlined) is checked against it in
test_planner_against_reference.py."""

from __future__ import annotations

from collections.abc import Sequence

from engram.behaviour.decay import NEW_FACT_CONFIDENCE, DecayStrategy
from engram.behaviour.kinds import fact_content
from engram.behaviour.models import Fact, fact_id
from engram.behaviour.ports import KeyGroup


def reference_plan_round(
    identity_id: str,
    groups: Sequence[KeyGroup],
    existing: Sequence[Fact],
    decay: DecayStrategy,
    *,
    now: int,
    round_cursor: int,
) -> tuple[list[Fact], list[str], list[Fact]]:
    """(facts to upsert, fact ids to delete, active facts as stored)."""
    by_subject = {f.subject: f for f in existing}
    upserts: list[Fact] = []
    touched: set[str] = set()
    for group in groups:
        touched.add(group.subject)
        current = by_subject.get(group.subject)
        if current is None:
            fact = Fact(
                id=fact_id(group.subject),
                identity_id=identity_id,
                category=group.category,
                subject=group.subject,
                content=fact_content(group.category, group.label, group.subject),
                confidence=NEW_FACT_CONFIDENCE,
                reinforcement_count=1,
                last_reinforced_at=now,
                created_at=now,
                updated_at=now,
                ease_factor=decay.new_fact_ease(),
                round_cursor=round_cursor,
            )
        elif current.round_cursor is not None and current.round_cursor >= group.max_seq:
            continue  # already reinforced by these very observations (crash rerun)
        else:
            fact = decay.reinforce(current, group.quality(), now=now).evolve(
                round_cursor=round_cursor
            )
        by_subject[group.subject] = fact
        upserts.append(fact)
    deletes: list[str] = []
    active: list[Fact] = []
    for subject, fact in by_subject.items():
        if subject not in touched and decay.apply(fact, now) < decay.expiry_threshold:
            deletes.append(fact.id)
        else:
            active.append(fact)
    return upserts, deletes, active


def reference_ranked(active: Sequence[Fact], decay: DecayStrategy, now: int) -> list[Fact]:
    """The active facts at their current confidence, expired ones left out, best first."""
    current = [f.evolve(confidence=decay.apply(f, now)) for f in active]
    kept = [f for f in current if f.confidence >= decay.expiry_threshold]
    return sorted(kept, key=lambda f: (-f.confidence * f.reinforcement_count, f.subject))
