"""The behavioural-memory facade the Lambda handlers call (all sync).

- ``record``: durable append (the SQS consumer); raises ``Unavailable`` on store trouble.
- ``emit`` / ``drain``: fire-and-forget appends with bounded in-flight tracking.
- ``load_memory``: consolidates within a budget and never raises on store trouble; it returns
  facts, the prompt section, tool affinities and why it degraded (``degraded``).
"""

from __future__ import annotations

import concurrent.futures as cf
import logging
import threading
from collections.abc import Sequence
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Any

from engram.behaviour.affinity import extract_tool_affinities
from engram.behaviour.consolidation import (
    OBSERVATION_RETENTION_DAYS,
    consolidate,
    with_current_confidence,
)
from engram.behaviour.decay import DecayStrategy, ExponentialDecay, decay_from_name
from engram.behaviour.emission import EmissionRules, observations_from_events
from engram.behaviour.inputs import QueryEvent, ToolEvent
from engram.behaviour.models import Fact, Observation
from engram.behaviour.ports import BehaviourStore
from engram.behaviour.prompt import format_memory_section
from engram.clock import Clock, SystemClock
from engram.errors import EngramError, InvalidInput, Unavailable

if TYPE_CHECKING:
    from engram.settings import Settings

log = logging.getLogger(__name__)

DEGRADED_TIMEOUT = "behaviour:timeout"
DEGRADED_UNAVAILABLE = "behaviour:unavailable"
DEGRADED_OVERLOADED = "behaviour:overloaded"


@dataclass(frozen=True, slots=True)
class MemoryLoad:
    """What a session start gets from behavioural memory."""

    facts: list[Fact] = field(default_factory=list)
    prompt_section: str = ""
    tool_affinities: dict[str, float] = field(default_factory=dict)
    degraded: list[str] = field(default_factory=list)


class BehaviourService:
    def __init__(
        self,
        store: BehaviourStore,
        *,
        decay: DecayStrategy | None = None,
        clock: Clock | None = None,
        consolidation_budget_ms: int = 500,
        token_budget: int = 300,
        rules: EmissionRules | None = None,
        max_in_flight: int = 1000,
        workers: int = 4,
        observation_retention_days: int = OBSERVATION_RETENTION_DAYS,
    ) -> None:
        if observation_retention_days < 1:
            raise InvalidInput("observationRetentionDays", "must be at least 1")
        self.store = store
        self.decay = decay or ExponentialDecay()
        self.clock = clock or SystemClock()
        self.budget_s = consolidation_budget_ms / 1000
        self.token_budget = token_budget
        self.rules = rules or EmissionRules()
        self.max_in_flight = max_in_flight
        self.observation_retention_days = observation_retention_days
        self.dropped = 0  # emits refused because too many were in flight
        self.failed = 0  # emits whose append failed (swallowed)
        self._workers = workers
        self._pool: cf.ThreadPoolExecutor | None = None
        self._emit_pool: cf.ThreadPoolExecutor | None = None
        self._lock = threading.Lock()
        self._in_flight: set[cf.Future[int]] = set()

    @classmethod
    def from_settings(cls, settings: Settings, redis_client: Any = None) -> BehaviourService:
        """A service on Redis (``redis_client`` or one made from ``settings``)."""
        from engram.adapters.redis_behaviour import RedisBehaviourStore
        from engram.adapters.redis_client import make_redis

        client = redis_client if redis_client is not None else make_redis(settings)
        store = RedisBehaviourStore(
            client, prefix=settings.redis_key_prefix, ttl_days=settings.identity_ttl_days
        )
        return cls(
            store,
            decay=decay_from_name(settings.decay),
            consolidation_budget_ms=settings.consolidation_budget_ms,
            token_budget=settings.prompt_token_budget,
            rules=EmissionRules.from_file(settings.emission_rules_file),
            observation_retention_days=settings.observation_retention_days,
        )

    # --- pools ------------------------------------------------------------------------
    def _consolidation_pool(self) -> cf.ThreadPoolExecutor:
        with self._lock:
            if self._pool is None:
                self._pool = cf.ThreadPoolExecutor(self._workers, "engram-consolidate")
            return self._pool

    def _emission_pool(self) -> cf.ThreadPoolExecutor:
        with self._lock:
            if self._emit_pool is None:
                self._emit_pool = cf.ThreadPoolExecutor(2, "engram-emit")
            return self._emit_pool

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
        self._check(identity_id, observations)
        cutoff = self.clock.now_ms() - self.observation_retention_days * 86_400_000
        fresh = [o for o in observations if o.created_at >= cutoff]
        if len(fresh) < len(observations):
            log.info(
                "dropped %d observation(s) older than retention",
                len(observations) - len(fresh),
            )
        if not fresh:
            return 0
        try:
            return self.store.append(identity_id, fresh)
        except EngramError:
            raise
        except Exception as exc:
            raise Unavailable(f"behaviour store unavailable: {type(exc).__name__}") from exc

    def emit(self, identity_id: str, observation: Observation) -> None:
        """Fire-and-forget append; failures are counted and swallowed."""
        self._check(identity_id, [observation])
        with self._lock:
            if len(self._in_flight) >= self.max_in_flight:
                self.dropped += 1
                return
        pool = self._emission_pool()
        with self._lock:
            future = pool.submit(self.store.append, identity_id, [observation])
            self._in_flight.add(future)
        future.add_done_callback(self._settled)

    def _settled(self, future: cf.Future[int]) -> None:
        with self._lock:
            self._in_flight.discard(future)
            if future.exception() is not None:
                self.failed += 1
        if future.exception() is not None:
            log.debug("observation append failed", exc_info=future.exception())

    @property
    def in_flight(self) -> int:
        with self._lock:
            return len(self._in_flight)

    def drain(self, timeout_s: float | None = None) -> None:
        """Wait for in-flight emits (all of them, or until ``timeout_s``)."""
        with self._lock:
            pending = list(self._in_flight)
        if pending:
            cf.wait(pending, timeout=timeout_s)

    def observations_from_events(
        self,
        identity_id: str,
        events: Sequence[QueryEvent | ToolEvent],
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
        return consolidate(
            identity_id,
            observations=self.store,
            facts=self.store,
            checkpoints=self.store.checkpoints,
            decay=self.decay,
            now=self.clock.now_ms(),
            retention_days=self.observation_retention_days,
        )

    def load_memory(self, identity_id: str) -> MemoryLoad:
        """Consolidate within the budget; degrade (never raise) on timeout or store trouble."""
        try:
            future = self._consolidation_pool().submit(self.consolidate, identity_id)
        except RuntimeError:  # pool shut down
            return MemoryLoad(degraded=[DEGRADED_OVERLOADED])
        try:
            facts = future.result(timeout=self.budget_s)
        except cf.TimeoutError:
            future.cancel()
            log.warning("consolidation exceeded its budget of %.0f ms", self.budget_s * 1000)
            return MemoryLoad(degraded=[DEGRADED_TIMEOUT])
        except Exception as exc:
            log.warning("consolidation failed: %s", type(exc).__name__)
            return MemoryLoad(degraded=[DEGRADED_UNAVAILABLE])
        return MemoryLoad(
            facts=facts,
            prompt_section=format_memory_section(facts, token_budget=self.token_budget),
            tool_affinities=extract_tool_affinities(facts),
            degraded=[],
        )

    def list_facts(self, identity_id: str) -> list[Fact]:
        """Active facts with their current confidence, best ranked first."""
        try:
            stored = self.store.get(identity_id)
        except Exception as exc:
            raise Unavailable(f"behaviour store unavailable: {type(exc).__name__}") from exc
        return with_current_confidence(stored, self.decay, self.clock.now_ms())

    def forget_fact(self, identity_id: str, fact_id: str) -> bool:
        try:
            return self.store.delete_fact(identity_id, fact_id)
        except Exception as exc:
            raise Unavailable(f"behaviour store unavailable: {type(exc).__name__}") from exc

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

    def close(self) -> None:
        """Drain emits and stop the worker threads."""
        self.drain()
        with self._lock:
            pools = [p for p in (self._pool, self._emit_pool) if p is not None]
            self._pool = self._emit_pool = None
        for pool in pools:
            pool.shutdown(wait=False, cancel_futures=True)
