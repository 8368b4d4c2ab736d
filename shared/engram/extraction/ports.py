"""Ports of the extraction domain (typing.Protocol) and its errors."""

from __future__ import annotations

from typing import Literal, Protocol

from engram.errors import EngramError
from engram.extraction.models import ExtractionResult, Proposal, TranscriptJob

SinkOutcome = Literal["created", "refreshed", "dropped"]


class ExtractionError(EngramError):
    """The extractor could not produce a trustworthy result (malformed model output, a
    configuration error such as an unknown model). Nothing of that attempt is used; the
    message is retried per the queue policy and dead-lettered after ``max_receives``."""

    code = "extraction_failed"


class ExtractionThrottled(ExtractionError):
    """A transient refusal (throttling, service unavailable, model timeout). The message is
    retried later; the batch stops calling the extractor for the rest of the run."""

    code = "extraction_throttled"


class Extractor(Protocol):
    """Turns a transcript into memory proposals."""

    def extract(
        self, job: TranscriptJob, *, persona_prompt: str | None, persona_scope: bool
    ) -> ExtractionResult:
        """``persona_prompt``: the persona's extraction prompt (None = the default);
        ``persona_scope``: whether persona-scope proposals may be made.

        Raises ExtractionError or ExtractionThrottled."""
        ...


class ProposalSink(Protocol):
    """Where proposals go (the memory store's ``propose``), plus the erasure check."""

    def propose(self, job: TranscriptJob, proposal: Proposal) -> SinkOutcome:
        """Store ``proposal`` as a ``pending_review`` memory with provenance
        ``proposal.source_channel_id``. Dedup: key already active -> "dropped";
        already pending -> "refreshed"; archived (rejected) -> "dropped", never resurrected.
        May raise engram.errors.MemoryDisabled / InvalidInput (the proposal is dropped) or
        Unavailable (the job is retried)."""
        ...

    def is_erased(self, team_id: str, user_id: str, since_ms: int) -> bool:
        """True when the user was erased at or after ``since_ms`` (the job's queuedAt): a
        transcript queued before its user's erasure must create nothing."""
        ...
