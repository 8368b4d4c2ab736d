"""Consolidation: pending observations become facts, once per round.

A round reads the identity's checkpoint, pending observations (as key groups) and facts from
one ``BehaviourStore``; at most one reinforcement per fact, however many observations map to
it; new facts for new keys; untouched facts decay and expired ones go; then one commit of
facts + checkpoint + prune. A store that fences its commit (Redis, in-memory) makes a round
exactly-once even under concurrency: a round that lost the race re-reads and returns the
winner's facts. Every fact also remembers the arrival sequence it was reinforced up to
(``round_cursor``), so a crash between writing facts and the checkpoint never reinforces
twice on the rerun, whatever the store.
"""

from __future__ import annotations

import time
from collections.abc import Sequence
from typing import Any, Protocol

from engram.behaviour.decay import (
    MAX_CONFIDENCE,
    NEW_FACT_CONFIDENCE,
    DecayStrategy,
    ExponentialDecay,
    numeric_decay,
)
from engram.behaviour.models import Fact, FactCategory, fact_id, trusted_fact
from engram.behaviour.ports import (
    BehaviourStore,
    CheckpointStore,
    FactRepository,
    KeyGroup,
    ObservationLog,
    RoundInput,
)
from engram.behaviour.sanitize import quote_name
from engram.behaviour.separate import resolve_store
from engram.clock import MS_PER_DAY
from engram.errors import InvalidInput

#: Consolidated observations are kept this long below the newest one consolidated.
PRUNE_KEEP_MS = 7 * MS_PER_DAY
#: Observations older than this are dropped, consolidated or not (the default of
#: ``Settings.observation_retention_days``).
OBSERVATION_RETENTION_DAYS = 30
RETENTION_MS = OBSERVATION_RETENTION_DAYS * MS_PER_DAY
MAX_ATTEMPTS = 3


def fact_content(category: FactCategory, label: str, subject: str) -> str:
    """Display text of a new fact; names are sanitised and quoted (inert data)."""
    name = quote_name(label)
    if category is FactCategory.TOOL_AFFINITY:
        return f"Tool {name} works well for this user"
    if category is FactCategory.TOOL_AVOIDANCE:
        return f"Tool {name} tends to fail for this user"
    if category is FactCategory.ENTITY_FREQUENCY:
        entity_type = subject.split(":", 2)[1] if subject.count(":") >= 2 else "entity"
        return f"Frequently works with {quote_name(entity_type, max_len=32)} {name}"
    if category is FactCategory.DOMAIN_PREFERENCE:
        return f"Often asks about {name}"
    return f"Recurring issue: {name}"


def _rank_key(fact: Fact) -> tuple[float, str]:
    return (-fact.confidence * fact.reinforcement_count, fact.subject)


def with_current_confidence(
    facts: Sequence[Fact], decay: DecayStrategy, now: int, *, copy: bool = True
) -> list[Fact]:
    """Facts carrying their current confidence, expired ones left out, best ranked first.

    ``copy=False`` updates the given objects in place (only for objects nobody else holds).
    """
    fast = numeric_decay(decay)
    if fast is not None:
        currents = _current_confidences(facts, fast, now)
    else:
        currents = [decay.apply(fact, now) for fact in facts]
    threshold = decay.expiry_threshold
    out: list[Fact] = []
    for fact, current in zip(facts, currents, strict=True):
        if current >= threshold:
            if copy:
                out.append(fact.evolve(confidence=current))
            else:
                fact.__dict__["confidence"] = current  # trusted: a value decay computed
                out.append(fact)
    out.sort(key=_rank_key)
    return out


def _current_confidences(facts: Sequence[Fact], decay: ExponentialDecay, now: int) -> list[float]:
    """``decay.apply`` of every fact, with the decay factor computed once per distinct
    (idle time, ease) — facts reinforced in the same round share it — and none for a fact
    reinforced at ``now`` (factor exactly 1). Same numbers as ``apply``."""
    factors: dict[tuple[int, float | None], float] = {}
    out: list[float] = []
    append = out.append
    for fact in facts:
        d = fact.__dict__
        idle = now - d["last_reinforced_at"]
        if idle <= 0:
            append(d["confidence"])
            continue
        key = (idle, d["ease_factor"])
        factor = factors.get(key)
        if factor is None:
            factor = factors[key] = decay.factor(idle, key[1])
        append(d["confidence"] * factor)
    return out


def plan_round(
    identity_id: str,
    groups: Sequence[KeyGroup],
    existing: Sequence[Fact],
    decay: DecayStrategy,
    *,
    now: int,
    round_cursor: int,
) -> tuple[list[Fact], list[str], list[Fact]]:
    """Steps 4-7: returns (facts to upsert, fact ids to delete, active facts as stored)."""
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
            fact = decay.reinforce(current, group.quality(), now=now)  # a new object
            fact.__dict__["round_cursor"] = round_cursor  # trusted, and ours alone
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


def _now(now: int | None) -> int:
    return now if now is not None else time.time_ns() // 1_000_000


def consolidate(
    identity_id: str,
    *,
    observations: ObservationLog,
    facts: FactRepository,
    checkpoints: CheckpointStore,
    decay: DecayStrategy,
    now: int | None = None,
    retention_days: int = OBSERVATION_RETENTION_DAYS,
) -> list[Fact]:
    """Consolidate pending observations of one identity into facts.

    The three stores may be parts of one store (``store, store, store.checkpoints``; the
    Redis classes on one server and prefix) — then the round is that store's, fenced — or
    separate objects with the observation log, fact repository and checkpoint methods.
    Returns the active facts with their current confidence (best ranked first).
    """
    store = resolve_store(observations, facts, checkpoints)
    return consolidate_store(
        store, identity_id, decay=decay, now=now, retention_days=retention_days
    )


def consolidate_store(
    store: BehaviourStore,
    identity_id: str,
    *,
    decay: DecayStrategy,
    now: int | None = None,
    retention_days: int = OBSERVATION_RETENTION_DAYS,
) -> list[Fact]:
    """One consolidation round of ``identity_id`` on ``store``.

    Observations older than ``retention_days`` are dropped whether consolidated or not;
    consolidated ones are kept 7 days below the checkpoint (``PRUNE_KEEP_MS``).
    """
    if retention_days < 1:
        raise InvalidInput("retentionDays", "must be at least 1")
    now_ms = _now(now)
    retention_ms = retention_days * MS_PER_DAY
    fast = numeric_decay(decay)
    read: RoundInput | None = None
    for attempt in range(MAX_ATTEMPTS):
        read = store.read_round(identity_id)  # fresh objects: no copies needed below
        if read.observation_count == 0:
            return with_current_confidence(read.facts, decay, now_ms, copy=False)
        plan: _InPlacePlan | None = None
        if fast is not None:
            # only the last attempt's read is answered with if fenced out: keep its undo
            plan = _plan_in_place(
                identity_id, read, fast, now_ms, keep_undo=attempt == MAX_ATTEMPTS - 1
            )
            upserts, deletes, active = plan.upserts, plan.deletes, plan.active
        else:
            upserts, deletes, active = plan_round(
                identity_id, read.groups, read.facts, decay, now=now_ms, round_cursor=read.max_seq
            )
        if store.commit_round(
            identity_id,
            read=read,
            upserts=upserts,
            deletes=deletes,
            prune_before_ms=read.max_created_at - PRUNE_KEEP_MS,
            hard_prune_before_ms=now_ms - retention_ms,
            now_ms=now_ms,
        ):
            if plan is not None:
                return plan.ranked(decay.expiry_threshold)
            return with_current_confidence(active, decay, now_ms, copy=False)
        if plan is not None:
            plan.undo()  # fenced out: the read facts are as read again
    # Fenced out every time (a storm of concurrent rounds): answer with what was read.
    assert read is not None
    return with_current_confidence(read.facts, decay, now_ms, copy=False)


_MUTABLE = (
    "confidence",
    "reinforcement_count",
    "last_reinforced_at",
    "updated_at",
    "ease_factor",
    "round_cursor",
)


class _InPlacePlan:
    """Steps 4-7 for a built-in decay on facts fresh from ``read_round`` (nobody else holds
    them): reinforced facts are updated in place (``undo`` restores them if the commit is
    fenced out and the plan kept its undo), new facts are built without validation, and the
    current confidence of every active fact is computed in the same pass (applied by
    ``ranked`` after the commit, since the commit stores the stored confidence)."""

    __slots__ = ("_undo", "active", "currents", "deletes", "upserts")

    def __init__(self) -> None:
        self.upserts: list[Fact] = []
        self.deletes: list[str] = []
        self.active: list[Fact] = []
        self.currents: list[float] = []
        self._undo: list[tuple[dict[str, Any], tuple[Any, ...]]] = []

    def undo(self) -> None:
        for d, values in self._undo:
            d.update(zip(_MUTABLE, values, strict=True))
        self._undo.clear()

    def ranked(self, threshold: float) -> list[Fact]:
        out: list[Fact] = []
        append = out.append
        for fact, current in zip(self.active, self.currents, strict=True):
            if current >= threshold:
                fact.__dict__["confidence"] = current  # trusted: a value decay computed
                append(fact)
        out.sort(key=_rank_key)
        return out


def _plan_in_place(
    identity_id: str, read: RoundInput, decay: ExponentialDecay, now: int, *, keep_undo: bool
) -> _InPlacePlan:
    plan = _InPlacePlan()
    round_cursor = read.max_seq
    by_subject = {f.subject: f for f in read.facts}
    touched: set[str] = set()
    touch = touched.add
    # ExponentialDecay itself: its ``reinforced_values`` inlined
    plain = type(decay) is ExponentialDecay
    amount = decay.reinforce_amount
    reinforced_values = decay.reinforced_values
    upsert = plan.upserts.append
    active = plan.active.append
    keep = plan.currents.append
    undo = plan._undo.append if keep_undo else None
    rerun: list[Fact] = []
    new_ease = decay.new_fact_ease()
    for group in read.groups:
        category, subject, _label, _count, successes, failures, max_seq = group
        touch(subject)
        current = by_subject.get(subject)
        if current is None:
            fact = _new_fact(identity_id, group, now, new_ease, round_cursor)
            by_subject[subject] = fact
            upsert(fact)
            active(fact)
            keep(NEW_FACT_CONFIDENCE)
            continue
        d = current.__dict__
        cursor = d["round_cursor"]
        if cursor is not None and cursor >= max_seq:
            rerun.append(current)  # already reinforced by these very observations
            continue
        if undo is not None:
            undo((d, tuple(d[name] for name in _MUTABLE)))
        if plain:
            confidence = min(MAX_CONFIDENCE, d["confidence"] + amount)
            ease = d["ease_factor"]
        else:
            quality = _quality(category, successes, failures)
            confidence, ease = reinforced_values(d["confidence"], d["ease_factor"], quality)
        d["confidence"] = confidence
        d["reinforcement_count"] += 1
        d["last_reinforced_at"] = now
        d["updated_at"] = now
        d["ease_factor"] = ease
        d["round_cursor"] = round_cursor
        upsert(current)
        active(current)
        keep(confidence)  # reinforced at ``now``: current = stored
    _decay_the_rest(plan, read.facts, touched=touched, rerun=rerun, decay=decay, now=now)
    return plan


def _new_fact(
    identity_id: str, group: KeyGroup, now: int, ease: float | None, round_cursor: int
) -> Fact:
    """A fact first seen this round (its values computed here: built without validation)."""
    return trusted_fact(
        {
            "id": fact_id(group.subject),
            "identity_id": identity_id,
            "category": group.category,
            "subject": group.subject,
            "content": fact_content(group.category, group.label, group.subject),
            "confidence": NEW_FACT_CONFIDENCE,
            "reinforcement_count": 1,
            "last_reinforced_at": now,
            "created_at": now,
            "updated_at": now,
            "ease_factor": ease,
            "round_cursor": round_cursor,
        }
    )


def _quality(category: FactCategory, successes: int, failures: int) -> float:
    """``KeyGroup.quality`` from its fields."""
    total = successes + failures
    if category is FactCategory.TOOL_AFFINITY and total:
        return successes / total
    if category is FactCategory.TOOL_AVOIDANCE and total:
        return failures / total
    return 1.0


def _decay_the_rest(
    plan: _InPlacePlan,
    facts: Sequence[Fact],
    *,
    touched: set[str],
    rerun: Sequence[Fact],
    decay: ExponentialDecay,
    now: int,
) -> None:
    """Untouched facts decay (and go once expired); rerun facts stay, whatever their decay."""
    idle = [f for f in facts if f.subject not in touched]
    threshold = decay.expiry_threshold
    active, keep = plan.active.append, plan.currents.append
    for fact, value in zip(idle, _current_confidences(idle, decay, now), strict=True):
        if value < threshold:
            plan.deletes.append(fact.id)
        else:
            active(fact)
            keep(value)
    for fact, value in zip(rerun, _current_confidences(rerun, decay, now), strict=True):
        active(fact)
        keep(value)


class SweepableFacts(Protocol):
    """What ``sweep_expired`` needs of a store (every ``BehaviourStore`` has it)."""

    def get(self, identity_id: str) -> list[Fact]: ...

    def delete_unchanged(self, identity_id: str, facts: Sequence[Fact]) -> int: ...


def sweep_expired(
    identity_id: str, *, facts: SweepableFacts, decay: DecayStrategy, now: int | None = None
) -> int:
    """Delete facts whose current confidence is below the expiry threshold (maintenance job).

    Only the facts still stored as read go, so a fact reinforced by a round between the read
    and the delete stays."""
    now_ms = _now(now)
    expired = [f for f in facts.get(identity_id) if decay.apply(f, now_ms) < decay.expiry_threshold]
    if not expired:
        return 0
    return facts.delete_unchanged(identity_id, expired)
