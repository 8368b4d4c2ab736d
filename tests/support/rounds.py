"""Consolidation rounds for the behavioural-memory tests of every tier: a whole round through
the public ``engram.consolidate`` on one store, and a planned round committed by hand (the
steps a racing consolidation takes, to put something between the read and the commit)."""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

from engram import ExponentialDecay, Fact, consolidate
from engram.behaviour.consolidation import plan_round
from engram.behaviour.decay import DecayStrategy
from engram.behaviour.ports import RoundInput
from engram.clock import FakeClock
from tests.support.observations import IDENTITY


def one_round(
    store: Any,
    clock: FakeClock | None = None,
    decay: DecayStrategy | None = None,
    identity: str = IDENTITY,
) -> list[Fact]:
    """``engram.consolidate`` with the one store as log, facts and checkpoints, at the clock's
    time (the real time without one), exponential decay unless told: the ranked facts."""
    return consolidate(
        identity,
        observations=store,
        facts=store,
        checkpoints=store.checkpoints,
        decay=decay or ExponentialDecay(),
        now=None if clock is None else clock.now_ms(),
    )


def by_subject(facts: Sequence[Fact]) -> dict[str, Fact]:
    return {f.subject: f for f in facts}


def consolidated(
    store: Any, clock: FakeClock, decay: DecayStrategy | None = None, identity: str = IDENTITY
) -> dict[str, Fact]:
    """The facts of one round (``one_round``) by subject."""
    return by_subject(one_round(store, clock, decay, identity))


def plan(
    read: RoundInput, clock: FakeClock, *, round_cursor: int | None = None
) -> tuple[list[Fact], list[str]]:
    """What a round over ``read`` upserts and deletes (exponential decay, up to the read's
    newest observation unless told): the production planner, which updates the read's facts
    in place."""
    cursor = read.max_seq if round_cursor is None else round_cursor
    planned = plan_round(
        IDENTITY, read, ExponentialDecay(), now=clock.now_ms(), round_cursor=cursor
    )
    return planned.upserts, planned.deletes


def commit(
    store: Any,
    read: RoundInput,
    clock: FakeClock,
    *,
    upserts: Sequence[Fact] = (),
    deletes: Sequence[str] = (),
) -> bool:
    """Commit a round read as ``read``, pruning nothing: False when the store fenced it out."""
    ok: bool = store.commit_round(
        IDENTITY,
        read=read,
        upserts=upserts,
        deletes=deletes,
        prune_before_ms=0,
        hard_prune_before_ms=0,
        now_ms=clock.now_ms(),
    )
    return ok
