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
from engram.behaviour.kinds import fact_content
from engram.behaviour.models import Fact, fact_id, trusted_fact
from engram.behaviour.ports import (
    BehaviourStore,
    CheckpointStore,
    FactRepository,
    KeyGroup,
    ObservationLog,
    RoundInput,
    quality,
)
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


def _rank_key(fact: Fact) -> tuple[float, str]:
    return (-fact.confidence * fact.reinforcement_count, fact.subject)


def with_current_confidence(
    facts: Sequence[Fact], decay: DecayStrategy, now: int, *, copy: bool = True
) -> list[Fact]:
    """Facts carrying their current confidence, expired ones left out, best ranked first.

    ``copy=False`` updates the given objects in place (only for objects nobody else holds).
    """
    currents = _currents(facts, decay, now)
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
    read: RoundInput | None = None
    for attempt in range(MAX_ATTEMPTS):
        read = store.read_round(identity_id)  # fresh objects: no copies needed below
        if read.observation_count == 0:
            return with_current_confidence(read.facts, decay, now_ms, copy=False)
        # only the last attempt's read is answered with if fenced out: keep its undo
        plan = plan_round(
            identity_id, read, decay, now=now_ms, keep_undo=attempt == MAX_ATTEMPTS - 1
        )
        if store.commit_round(
            identity_id,
            read=read,
            upserts=plan.upserts,
            deletes=plan.deletes,
            prune_before_ms=read.max_created_at - PRUNE_KEEP_MS,
            hard_prune_before_ms=now_ms - retention_ms,
            now_ms=now_ms,
        ):
            return plan.ranked(decay.expiry_threshold)
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


class RoundPlan:
    """What one round writes (steps 4-7), planned on facts fresh from ``read_round`` (nobody
    else holds them): a fact reinforced by a built-in decay is updated in place (``undo``
    restores it if the commit is fenced out and the plan kept its undo; any other strategy's
    ``reinforce`` gives a new object), and the current confidence of every active fact is
    computed in the same pass (applied by ``ranked`` after the commit, since the commit
    stores the stored confidence)."""

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
        """The active facts at their current confidence, expired ones left out, best first."""
        out: list[Fact] = []
        append = out.append
        for fact, current in zip(self.active, self.currents, strict=True):
            if current >= threshold:
                fact.__dict__["confidence"] = current  # trusted: a value decay computed
                append(fact)
        out.sort(key=_rank_key)
        return out


def plan_round(
    identity_id: str,
    read: RoundInput,
    decay: DecayStrategy,
    *,
    now: int,
    round_cursor: int | None = None,
    keep_undo: bool = False,
) -> RoundPlan:
    """The round over ``read`` for any decay strategy: one reinforcement per key group
    (none for a fact these very observations reinforced already: a crash rerun), a new fact
    per new key, untouched facts decayed and expired ones deleted. The facts remember
    ``round_cursor`` (the read's newest observation unless told). The built-in strategies'
    numbers are computed inline (``numeric_decay``); any other goes through its methods."""
    plan = RoundPlan()
    cursor_now = read.max_seq if round_cursor is None else round_cursor
    fast = numeric_decay(decay)
    by_subject = {f.subject: f for f in read.facts}
    touched: set[str] = set()
    upsert, active, keep = plan.upserts.append, plan.active.append, plan.currents.append
    undo = plan._undo.append if keep_undo else None
    rerun: list[Fact] = []
    new_ease = decay.new_fact_ease()
    for group in read.groups:
        subject = group.subject
        touched.add(subject)
        current = by_subject.get(subject)
        if current is None:
            fact = _new_fact(identity_id, group, now, new_ease, cursor_now)
            by_subject[subject] = fact
            confidence = NEW_FACT_CONFIDENCE if fast is not None else decay.apply(fact, now)
        elif (cursor := current.__dict__["round_cursor"]) is not None and cursor >= group.max_seq:
            rerun.append(current)  # already reinforced by these very observations
            continue
        elif fast is not None:
            if undo is not None:
                d = current.__dict__
                undo((d, tuple(d[name] for name in _MUTABLE)))
            fact = current
            confidence = _reinforce_in_place(fact, group, fast, now, cursor_now)
        else:
            fact = decay.reinforce(current, group.quality(), now=now)  # a new object
            fact.__dict__["round_cursor"] = cursor_now  # trusted, and ours alone
            confidence = decay.apply(fact, now)
        upsert(fact)
        active(fact)
        keep(confidence)
    _decay_the_rest(plan, read.facts, touched=touched, rerun=rerun, decay=decay, now=now)
    return plan


def _reinforce_in_place(
    fact: Fact, group: KeyGroup, decay: ExponentialDecay, now: int, round_cursor: int
) -> float:
    """One reinforcement of ``fact`` by a built-in decay, in place; its (current = stored)
    confidence. ``ExponentialDecay`` itself has its ``reinforced_values`` inlined."""
    d = fact.__dict__
    confidence: float
    if type(decay) is ExponentialDecay:
        confidence = min(MAX_CONFIDENCE, d["confidence"] + decay.reinforce_amount)
        ease = d["ease_factor"]
    else:
        q = quality(group.count, group.successes, group.failures)
        confidence, ease = decay.reinforced_values(d["confidence"], d["ease_factor"], q)
    d["confidence"] = confidence
    d["reinforcement_count"] += 1
    d["last_reinforced_at"] = now
    d["updated_at"] = now
    d["ease_factor"] = ease
    d["round_cursor"] = round_cursor
    return confidence


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


def _currents(facts: Sequence[Fact], decay: DecayStrategy, now: int) -> list[float]:
    """The current confidence of each of ``facts``."""
    fast = numeric_decay(decay)
    if fast is not None:
        return _current_confidences(facts, fast, now)
    return [decay.apply(fact, now) for fact in facts]


def _decay_the_rest(
    plan: RoundPlan,
    facts: Sequence[Fact],
    *,
    touched: set[str],
    rerun: Sequence[Fact],
    decay: DecayStrategy,
    now: int,
) -> None:
    """Untouched facts decay (and go once expired); rerun facts stay, whatever their decay."""
    idle = [f for f in facts if f.subject not in touched]
    threshold = decay.expiry_threshold
    active, keep = plan.active.append, plan.currents.append
    for fact, value in zip(idle, _currents(idle, decay, now), strict=True):
        if value < threshold:
            plan.deletes.append(fact.id)
        else:
            active(fact)
            keep(value)
    for fact, value in zip(rerun, _currents(rerun, decay, now), strict=True):
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
