"""The extraction job's ``ProposalSink`` over the memory service.

``BackgroundJobs.propose_outcome`` (``MemoryService.jobs``) stores a ``pending_review`` memory
with its provenance and applies the proposal dedup rules (key active: dropped; pending:
refreshed; archived / rejected: never resurrected; memory switched off: dropped) and says which
of "created", "refreshed" or "dropped" happened; created vs refreshed comes from the write
itself, so two concurrent proposals of one key count one "created" and one "refreshed".

``is_erased`` answers from an optional erasure log; the job also wraps every sink in
``ErasureAwareSink`` over its own log. Those checks run before the proposals are written; the
write itself passes the job's ``queued_at`` as ``not_erased_since_ms``, so the store refuses a
proposal when the user was erased after the check (nothing created after ``DELETE /v1/me``).
"""

from __future__ import annotations

from engram.extraction.models import Proposal, TranscriptJob
from engram.extraction.ports import SinkOutcome
from engram.maintenance.ports import ErasureLog
from engram.memories.background import BackgroundJobs
from engram.memories.models import Scope


class MemoryProposalSink:
    """Extraction proposals become ``pending_review`` memories through ``MemoryService``."""

    def __init__(self, service: BackgroundJobs, *, erasures: ErasureLog | None = None) -> None:
        self._service = service
        self._erasures = erasures

    def propose(self, job: TranscriptJob, proposal: Proposal) -> SinkOutcome:
        result = self._service.propose_outcome(
            job.team_id,
            job.user_id,
            job.persona_id,
            proposal.key,
            proposal.value,
            proposal.confidence,
            proposal.source_channel_id,
            Scope(proposal.scope.value),
            not_erased_since_ms=job.queued_at,
        )
        return result.outcome

    def is_erased(self, team_id: str, user_id: str, since_ms: int) -> bool:
        return self._erasures is not None and self._erasures.erased_since(
            team_id, user_id, since_ms
        )
