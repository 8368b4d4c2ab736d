"""The caller's own data across both stores: export (``GET /v1/me/export``) and erasure
(``DELETE /v1/me``).

Erasure order: (1) in one PostgreSQL transaction, record the erasure in the erasure log, so
the extraction drain never turns a transcript queued before it into memories and the
maintenance job purges observations SQS delivers late, and erase the user's memories (scopes
``user`` and ``persona_user``, and the ``persona`` memories learnt from their transcripts) with
the audit rows and suppressions about them; (2) erase the behavioural memory in Redis
(observations, facts, checkpoint and the observation-id records that make ingestion
idempotent). With PostgreSQL down the answer is 503 before anything is erased; with Redis
down, 503 after the erasure was recorded and the memories erased.
The client retries (every step is idempotent) and the maintenance job's purge is the backstop.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

from engram.behaviour.models import TRUSTED, Fact, Observation
from engram.behaviour.service import BehaviourService
from engram.clock import Clock, SystemClock
from engram.identity import Caller
from engram.memories.models import Memory, Scope
from engram.memories.service import MemoryService


@dataclass(frozen=True)
class Export:
    """Everything held about ``caller``: stored observations, facts at their current
    confidence, the consolidation checkpoint and the caller's memories."""

    caller: Caller
    exported_at: int
    observations: list[Observation]
    facts: list[Fact]
    checkpoint: int | None
    memories: list[Memory]


@dataclass(frozen=True)
class Erasure:
    """What ``DELETE /v1/me`` erased, by kind (``memories`` counts every scope,
    ``persona_memories`` the persona-scope ones among them)."""

    caller: Caller
    erased_at: int
    observations: int
    facts: int
    checkpoints: int
    idempotency_records: int
    memories: int
    persona_memories: int
    review_actions: int
    suppressions: int
    memory_versions: int
    memory_changes: int


class MeService:
    def __init__(
        self,
        behaviour: BehaviourService,
        memories: MemoryService,
        *,
        clock: Clock | None = None,
    ) -> None:
        self.behaviour = behaviour
        self.memories = memories
        self.clock = clock or SystemClock()

    def export(self, caller: Caller) -> Export:
        data: dict[str, Any] = self.behaviour.export(caller.identity_id)
        memories = self.memories.export(caller)["memories"]
        return Export(
            caller=caller,
            exported_at=self.clock.now_ms(),
            # stored records, read back as they were accepted
            observations=[
                Observation.model_validate(
                    {k: v for k, v in o.items() if k != "seq"}, context=TRUSTED
                )
                for o in data.get("observations", [])
            ],
            facts=[Fact.model_validate(f) for f in data.get("currentFacts", [])],
            checkpoint=data.get("checkpoint"),
            memories=[Memory.model_validate({**m, "teamId": caller.team_id}) for m in memories],
        )

    def erase(self, caller: Caller) -> Erasure:
        now = self.clock.now_ms()
        memory_counts = self.memories.erase(caller, at_ms=now)
        identity = caller.identity_id
        checkpoint = self._checkpoint(identity)
        redis_counts = self.behaviour.erase(identity)
        observations = int(redis_counts.get("observations", 0))
        return Erasure(
            caller=caller,
            erased_at=now,
            observations=observations,
            facts=int(redis_counts.get("facts", 0)),
            checkpoints=1 if checkpoint is not None else 0,
            idempotency_records=int(redis_counts.get("idempotencyRecords", observations)),
            memories=sum(int(memory_counts.get(scope.value, 0)) for scope in Scope),
            persona_memories=int(memory_counts.get(Scope.PERSONA.value, 0)),
            review_actions=int(memory_counts.get("review_actions", 0)),
            suppressions=int(memory_counts.get("suppressions", 0)),
            memory_versions=int(memory_counts.get("versions", 0)),
            memory_changes=int(memory_counts.get("changes", 0)),
        )

    def _checkpoint(self, identity_id: str) -> int | None:
        try:
            value: int | None = self.behaviour.store.checkpoints.get(identity_id)
        except Exception:
            return None  # the erase below reports the outage
        return value
