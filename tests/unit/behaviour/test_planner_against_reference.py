"""The production consolidation planner (``plan_round``) plans what the reference planner
plans — the same upserts, deletes and ranked facts — for random rounds (new keys, reinforced,
idle, expired and crash-rerun facts) under the built-in decays and under a decay strategy of
one's own (which the planner drives through its methods)."""

from __future__ import annotations

import math

from hypothesis import given, settings
from hypothesis import strategies as st
from tests.unit.behaviour.reference_planner import reference_plan_round, reference_ranked

from engram import AdaptiveDecay, ExponentialDecay, Fact
from engram.behaviour.consolidation import plan_round
from engram.behaviour.decay import DecayStrategy
from engram.behaviour.models import FactCategory, fact_id, trusted_fact
from engram.behaviour.ports import KeyGroup, RoundInput
from engram.clock import MS_PER_DAY

ID = "t:u"
NOW = 1_000 * MS_PER_DAY


class LinearDecay:
    """A strategy of one's own: loses 0.02 a day, reinforcement adds 0.2 × quality."""

    expiry_threshold = 0.15

    def apply(self, fact: Fact, now: int) -> float:
        days = max(0.0, (now - fact.last_reinforced_at) / MS_PER_DAY)
        return max(0.0, fact.confidence - 0.02 * days)

    def reinforce(self, fact: Fact, quality: float = 1.0, *, now: int) -> Fact:
        return fact.evolve(
            confidence=min(1.0, fact.confidence + 0.2 * quality),
            reinforcement_count=fact.reinforcement_count + 1,
            last_reinforced_at=now,
            updated_at=now,
        )

    def new_fact_ease(self) -> float | None:
        return None


SUBJECTS = [
    (FactCategory.TOOL_AFFINITY, "tool_affinity:a"),
    (FactCategory.TOOL_AVOIDANCE, "tool_avoidance:a"),
    (FactCategory.TOOL_AFFINITY, "tool_affinity:b"),
    (FactCategory.ENTITY_FREQUENCY, "entity_frequency:account:1"),
    (FactCategory.DOMAIN_PREFERENCE, "domain_preference:royalty"),
    (FactCategory.DOMAIN_PREFERENCE, "domain_preference:tax"),
]
DECAYS: list[DecayStrategy] = [ExponentialDecay(), AdaptiveDecay(), LinearDecay()]

fact_strategy = st.tuples(
    st.floats(0.1, 1.0),  # stored confidence
    st.integers(1, 9),  # reinforcement count
    st.integers(0, 60),  # idle days
    st.one_of(st.none(), st.floats(1.3, 3.0)),  # ease
    st.one_of(st.none(), st.integers(0, 20)),  # round cursor
)
group_strategy = st.tuples(st.integers(0, 5), st.integers(0, 4), st.integers(1, 20))


def _fact(index: int, values: tuple[float, int, int, float | None, int | None]) -> Fact:
    confidence, count, idle, ease, cursor = values
    category, subject = SUBJECTS[index]
    at = NOW - idle * MS_PER_DAY
    return trusted_fact(
        {
            "id": fact_id(subject),
            "identity_id": ID,
            "category": category,
            "subject": subject,
            "content": subject,
            "confidence": confidence,
            "reinforcement_count": count,
            "last_reinforced_at": at,
            "created_at": at,
            "updated_at": at,
            "ease_factor": ease,
            "round_cursor": cursor,
        }
    )


def _group(index: int, successes: int, failures: int, max_seq: int) -> KeyGroup:
    """The group of ``SUBJECTS[index]``: a tool's with the tool's outcomes, any other's with
    none (its count then)."""
    category, subject = SUBJECTS[index]
    if category is FactCategory.TOOL_AFFINITY:
        successes = max(successes, 1)
        return KeyGroup(category, subject, "a", successes, successes, failures, max_seq)
    if category is FactCategory.TOOL_AVOIDANCE:
        failures = max(failures, 1)
        return KeyGroup(category, subject, "a", failures, successes, failures, max_seq)
    return KeyGroup(category, subject, "label", successes + failures + 1, 0, 0, max_seq)


def _dumps(facts: list[Fact]) -> list[dict[str, object]]:
    return [f.model_dump() for f in facts]


def _close(a: list[dict[str, object]], b: list[dict[str, object]]) -> bool:
    if len(a) != len(b):
        return False
    for x, y in zip(a, b, strict=True):
        if x.keys() != y.keys():
            return False
        for key, value in x.items():
            other = y[key]
            if isinstance(value, float) and isinstance(other, float):
                if not math.isclose(value, other, rel_tol=1e-12, abs_tol=1e-12):
                    return False
            elif value != other:
                return False
    return True


@settings(max_examples=150, deadline=None)
@given(
    facts=st.dictionaries(st.integers(0, 5), fact_strategy, max_size=6),
    groups=st.dictionaries(st.integers(0, 5), group_strategy, max_size=6),
    decay_index=st.integers(0, len(DECAYS) - 1),
)
def test_the_planner_plans_what_the_reference_plans(
    facts: dict[int, tuple[float, int, int, float | None, int | None]],
    groups: dict[int, tuple[int, int, int]],
    decay_index: int,
) -> None:
    decay = DECAYS[decay_index]
    key_groups = [_group(i, succ, fail, seq) for i, (succ, fail, seq) in groups.items()]
    cursor = max((g.max_seq for g in key_groups), default=0)
    existing = [_fact(i, values) for i, values in facts.items()]

    upserts, deletes, active = reference_plan_round(
        ID, key_groups, [f.evolve() for f in existing], decay, now=NOW, round_cursor=cursor
    )
    expected_ranked = reference_ranked(active, decay, NOW)

    read = RoundInput(cursor=0, version=0, facts=[f.evolve() for f in existing])
    read.groups, read.max_seq = key_groups, cursor
    plan = plan_round(ID, read, decay, now=NOW, keep_undo=True)

    assert _close(_dumps(plan.upserts), _dumps(upserts))
    assert plan.deletes == deletes
    assert sorted(f.subject for f in plan.active) == sorted(f.subject for f in active)
    assert _close(_dumps(plan.ranked(decay.expiry_threshold)), _dumps(expected_ranked))


def test_undo_gives_back_the_facts_as_read_after_a_fenced_commit() -> None:
    existing = [_fact(0, (0.5, 2, 3, None, 1)), _fact(4, (0.4, 1, 10, 2.5, None))]
    read = RoundInput(cursor=0, version=0, facts=[f.evolve() for f in existing])
    read.groups = [KeyGroup(FactCategory.TOOL_AFFINITY, "tool_affinity:a", "a", 2, 2, 1, 9)]
    read.max_seq = 9
    plan = plan_round(ID, read, AdaptiveDecay(), now=NOW, keep_undo=True)
    assert plan.upserts[0].reinforcement_count == 3  # reinforced in place
    plan.undo()
    assert read.facts == existing
