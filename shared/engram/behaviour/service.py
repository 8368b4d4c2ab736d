"""The behavioural-memory facade (all sync; no threads of its own).

- ``record``: durable append (the SQS consumer); raises ``Unavailable`` on store trouble.
- ``load``: consolidates now and returns facts, the prompt section and tool affinities; it
  raises on store trouble. The session use case (``engram.use_cases.session``) runs it within
  the session budget and turns a failure or a timeout into ``degraded``.
"""

from __future__ import annotations

import logging
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any

from engram.behaviour.affinity import extract_tool_affinities
from engram.behaviour.commands import QueryAsked, ToolRan
from engram.behaviour.consolidation import (
    OBSERVATION_RETENTION_DAYS,
    consolidate_store,
    with_current_confidence,
)
from engram.behaviour.decay import DecayStrategy, ExponentialDecay
from engram.behaviour.emission import EmissionRules, observations_from_events
from engram.behaviour.models import Fact, Observation
from engram.behaviour.ports import BehaviourStore
from engram.behaviour.prompt import format_memory_section
from engram.clock import Clock, SystemClock
from engram.errors import EngramError, InvalidInput, NotFound, Unavailable

log = logging.getLogger(__name__)


@dataclass(frozen=True, slots=True)
class BehaviourContext:
    """What a session start gets from behavioural memory."""

    facts: list[Fact] = field(default_factory=list)
    prompt_section: str = ""
    tool_affinities: dict[str, float] = field(default_factory=dict)


def _store_error(exc: BaseException) -> BaseException:
    """What a store failure is to the caller: Engram's own errors as they are, anything else
    (a connection error...) ``Unavailable``."""
    if isinstance(exc, EngramError):
        return exc
    error = Unavailable(f"behaviour store unavailable: {type(exc).__name__}")
    error.__cause__ = exc
    return error


class BehaviourService:
    def __init__(
        self,
        store: BehaviourStore,
        *,
        decay: DecayStrategy | None = None,
        clock: Clock | None = None,
        token_budget: int = 300,
        rules: EmissionRules | None = None,
        observation_retention_days: int = OBSERVATION_RETENTION_DAYS,
    ) -> None:
        if observation_retention_days < 1:
            raise InvalidInput("observationRetentionDays", "must be at least 1")
        self.store = store
        self.decay = decay or ExponentialDecay()
        self.clock = clock or SystemClock()
        self.token_budget = token_budget
        self.rules = rules or EmissionRules()
        self.observation_retention_days = observation_retention_days

    # --- writes -----------------------------------------------------------------------
    @staticmethod
    def _check(identity_id: str, observations: Sequence[Observation]) -> None:
        for i, obs in enumerate(observations):
            if not isinstance(obs, Observation):
                raise InvalidInput(f"observations.{i}", "must be an Observation")
            if obs.identity_id != identity_id:
                raise InvalidInput(
                    f"observations.{i}.identityId", "does not match the identity being recorded"
                )

    def record(self, identity_id: str, observations: Sequence[Observation]) -> int:
        """Durably append; returns how many were new (a redelivery adds nothing).

        Observations already older than the retention window are dropped (not stored, not an
        error, not counted): a late redelivery of an aged observation must not reinforce a
        fact again after the observation's id tombstone was pruned.
        """
        fresh = self._fresh(identity_id, observations)
        if not fresh:
            return 0
        try:
            return self.store.append(identity_id, fresh)
        except EngramError:
            raise
        except Exception as exc:
            raise _store_error(exc) from exc

    def record_many(
        self, groups: Mapping[str, Sequence[Observation]]
    ) -> dict[str, int | BaseException]:
        """``record`` for several identities in one store call (``append_many``: one Redis
        pipeline, one per shard on a cluster): per identity how many were new, or the error its
        write raised (the others are written all the same)."""
        out: dict[str, int | BaseException] = {}
        fresh: dict[str, list[Observation]] = {}
        for identity_id, observations in groups.items():
            try:
                kept = self._fresh(identity_id, observations)
            except InvalidInput as exc:
                out[identity_id] = exc
                continue
            if kept:
                fresh[identity_id] = kept
            else:
                out[identity_id] = 0
        try:
            written: Mapping[str, int | BaseException] = (
                self.store.append_many(fresh) if fresh else {}
            )
        except Exception as exc:  # the call itself failed: none of them was written
            written = dict.fromkeys(fresh, exc)
        for identity_id in fresh:
            result = written.get(identity_id, 0)
            out[identity_id] = _store_error(result) if isinstance(result, BaseException) else result
        return out

    def _fresh(self, identity_id: str, observations: Sequence[Observation]) -> list[Observation]:
        """``observations`` checked for ``identity_id``, without those already older than the
        retention window (see ``record``)."""
        self._check(identity_id, observations)
        cutoff = self.clock.now_ms() - self.observation_retention_days * 86_400_000
        fresh = [o for o in observations if o.created_at >= cutoff]
        if len(fresh) < len(observations):
            log.info(
                "dropped %d observation(s) older than retention",
                len(observations) - len(fresh),
            )
        return fresh

    def observations_from_events(
        self,
        identity_id: str,
        events: Sequence[QueryAsked | ToolRan],
        *,
        now_ms: int,
        batch_id: str | None = None,
    ) -> list[Observation]:
        return observations_from_events(
            identity_id, events, now_ms=now_ms, rules=self.rules, batch_id=batch_id
        )

    # --- reads ------------------------------------------------------------------------
    def consolidate(self, identity_id: str) -> list[Fact]:
        """Consolidate now, without a budget (raises on store trouble)."""
        return consolidate_store(
            self.store,
            identity_id,
            decay=self.decay,
            now=self.clock.now_ms(),
            retention_days=self.observation_retention_days,
        )

    def load(self, identity_id: str) -> BehaviourContext:
        """Consolidate now (raises on store trouble) and render what a session needs."""
        facts = self.consolidate(identity_id)
        return BehaviourContext(
            facts=facts,
            prompt_section=format_memory_section(facts, token_budget=self.token_budget),
            tool_affinities=extract_tool_affinities(facts),
        )

    def list_facts(self, identity_id: str) -> list[Fact]:
        """Active facts with their current confidence, best ranked first."""
        try:
            stored = self.store.get(identity_id)
        except Exception as exc:
            raise Unavailable(f"behaviour store unavailable: {type(exc).__name__}") from exc
        return with_current_confidence(stored, self.decay, self.clock.now_ms())

    def forget_fact(self, identity_id: str, fact_id: str) -> None:
        """Forget one fact of the identity; ``NotFound`` when it has no such fact."""
        try:
            deleted = self.store.delete_fact(identity_id, fact_id)
        except Exception as exc:
            raise Unavailable(f"behaviour store unavailable: {type(exc).__name__}") from exc
        if not deleted:
            raise NotFound("fact not found")

    def erase(self, identity_id: str) -> dict[str, int]:
        try:
            return self.store.erase(identity_id)
        except Exception as exc:
            raise Unavailable(f"behaviour store unavailable: {type(exc).__name__}") from exc

    def export(self, identity_id: str) -> dict[str, Any]:
        """Stored observations and facts, plus ``currentFacts`` with decayed confidence."""
        try:
            data = self.store.export(identity_id)
        except Exception as exc:
            raise Unavailable(f"behaviour store unavailable: {type(exc).__name__}") from exc
        stored = [Fact.model_validate(f) for f in data.get("facts", [])]
        now = self.clock.now_ms()
        data["currentFacts"] = [
            f.model_dump(by_alias=True, exclude_none=True)
            for f in with_current_confidence(stored, self.decay, now)
        ]
        return data
