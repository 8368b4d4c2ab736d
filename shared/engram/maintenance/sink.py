"""The extraction job's ``ProposalSink`` over the memory service.

``MemoryService.propose`` stores a ``pending_review`` memory with its provenance and applies
the dedup rules of SPEC §3 (key active: dropped; pending: refreshed; archived / rejected:
never resurrected; memory switched off: dropped) but answers only ``Memory | None``. To tell
*created* from *refreshed* this sink looks the key up first, in the same target the service
will write (``save_target``), with the same system context. The look-up and the write are two
statements: a concurrent proposal of the same key may make one "created" count as
"refreshed" (counts only; the stored row is right either way). A ``propose`` that returned
the outcome would be cleaner.

``is_erased`` answers from an optional erasure log; the job also wraps every sink in
``ErasureAwareSink`` over its own log.
"""

from __future__ import annotations

from typing import Protocol

from engram.extraction.models import Proposal, TranscriptJob
from engram.extraction.ports import SinkOutcome
from engram.identity import Caller
from engram.maintenance.ports import ErasureLog
from engram.memories.models import Memory, Scope
from engram.memories.ports import MemoryStore
from engram.memories.privacy import system_context
from engram.memories.scopes import save_target


class Proposer(Protocol):
    """``MemoryService.propose``."""

    def propose(  # noqa: PLR0917 - MemoryService's positional contract
        self,
        team_id: str,
        user_id: str,
        persona_id: str | None,
        key: str,
        value: str,
        confidence: float,
        source_channel_id: str | None,
        scope: Scope | str | None = None,
    ) -> Memory | None: ...


class MemoryProposalSink:
    def __init__(
        self, service: Proposer, store: MemoryStore, *, erasures: ErasureLog | None = None
    ) -> None:
        self._service = service
        self._store = store
        self._erasures = erasures

    def propose(self, job: TranscriptJob, proposal: Proposal) -> SinkOutcome:
        scope = Scope(proposal.scope.value)
        system = Caller(
            user_id=job.user_id, team_id=job.team_id, is_team_admin=True, is_service=True
        )
        target = save_target(system, job.persona_id, scope)
        existing = self._store.find_by_key(
            system_context(job.team_id, job.user_id),
            target.scope,
            target.owner_id,
            target.user_id,
            proposal.key,
        )
        stored = self._service.propose(
            job.team_id,
            job.user_id,
            job.persona_id,
            proposal.key,
            proposal.value,
            proposal.confidence,
            proposal.source_channel_id,
            scope,
        )
        if stored is None:
            return "dropped"
        return "created" if existing is None else "refreshed"

    def is_erased(self, team_id: str, user_id: str, since_ms: int) -> bool:
        return self._erasures is not None and self._erasures.erased_since(
            team_id, user_id, since_ms
        )
