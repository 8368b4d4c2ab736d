"""Drain policy for the extraction queue (pure domain; the maintenance job supplies the I/O).

For each received message the outcome is exactly one of:

* ``done`` — processed (proposals created/refreshed/dropped), or nothing to do (extraction
  disabled, user erased after the transcript was queued): delete the message;
* ``retry`` — leave it on the queue (change its visibility) to be received again: a failed
  attempt below ``max_receives``, or not attempted in this run (time budget spent, extractor
  throttled earlier in the batch);
* ``dead_letter`` — a failed attempt at ``max_receives`` or beyond, or a body that can never be
  parsed: send it to the dead-letter queue (with ``reason``), then delete it.

Nothing is ever dropped silently. Re-processing a job after a partial failure is harmless:
proposals are idempotent in the store (an already-pending key is only refreshed).
"""

from __future__ import annotations

import json
from collections.abc import Callable, Iterable
from dataclasses import dataclass, field, replace
from typing import Literal

from pydantic import BaseModel, ConfigDict, ValidationError

from engram.errors import InvalidInput, MemoryDisabled
from engram.extraction.models import ExtractionResult, Proposal, ProposalScope, TranscriptJob
from engram.extraction.ports import (
    ExtractionError,
    ExtractionThrottled,
    Extractor,
    ProposalSink,
)

Disposition = Literal["done", "retry", "dead_letter"]


@dataclass(frozen=True)
class ReceivedJob:
    """One received queue message: its id (SQS messageId), the body (raw JSON text or an
    already-parsed job) and how many times it has been received (ApproximateReceiveCount,
    this receive included)."""

    message_id: str
    body: str | TranscriptJob
    receive_count: int = 1


class ExtractionConfig(BaseModel):
    """Per-job extraction settings, from the job's persona (defaults when there is none).

    ``enabled`` False: the transcript is consumed and nothing is proposed.
    ``prompt``: the persona's extraction prompt (None: the extractor's default).
    ``persona_scope``: persona-level knowledge may be proposed (scope "persona")."""

    model_config = ConfigDict(frozen=True)

    enabled: bool = True
    prompt: str | None = None
    persona_scope: bool = False

    @classmethod
    def for_persona(
        cls, *, memory_enabled: bool, extraction_enabled: bool, prompt: str | None
    ) -> ExtractionConfig:
        """The recommended mapping of a persona's settings (the API's ``{memoryEnabled,
        extraction: {enabled, prompt}}``): memory off -> the transcript is consumed and nothing
        is proposed; ``extraction.enabled`` -> persona-scope learning on; the prompt (if any)
        replaces the default prompt of model-based extractors."""
        return cls(
            enabled=memory_enabled,
            prompt=(prompt or "").strip() or None,
            persona_scope=extraction_enabled,
        )


@dataclass(frozen=True)
class JobOutcome:
    message_id: str
    job_id: str | None
    disposition: Disposition
    reason: str | None = None
    created: int = 0
    refreshed: int = 0
    dropped: int = 0


@dataclass
class BatchOutcome:
    results: list[JobOutcome] = field(default_factory=list)
    input_tokens: int = 0
    output_tokens: int = 0
    stopped_early: bool = False  # budget spent or extractor throttled: some jobs not attempted

    def _ids(self, disposition: Disposition) -> list[str]:
        return [r.message_id for r in self.results if r.disposition == disposition]

    @property
    def done(self) -> list[str]:
        return self._ids("done")

    @property
    def retry(self) -> list[str]:
        return self._ids("retry")

    @property
    def dead_letter(self) -> list[str]:
        return self._ids("dead_letter")

    def counts(self) -> dict[str, int]:
        """Numbers for EMF metrics."""
        return {
            "jobsDone": len(self.done),
            "jobsRetried": len(self.retry),
            "jobsDeadLettered": len(self.dead_letter),
            "jobsSkippedErased": sum(1 for r in self.results if r.reason == "erased"),
            "proposalsCreated": sum(r.created for r in self.results),
            "proposalsRefreshed": sum(r.refreshed for r in self.results),
            "proposalsDropped": sum(r.dropped for r in self.results),
            "inputTokens": self.input_tokens,
            "outputTokens": self.output_tokens,
        }


def parse_job(body: str | TranscriptJob) -> TranscriptJob:
    """A queue message body as a job; InvalidInput naming the field when it is not one."""
    if isinstance(body, TranscriptJob):
        return body
    try:
        return TranscriptJob.model_validate_json(body)
    except ValidationError as exc:
        first = exc.errors()[0]
        where = ".".join(str(p) for p in first["loc"]) or "body"
        raise InvalidInput(where, first["msg"]) from exc


def effective_scope(
    proposal: Proposal, job: TranscriptJob, *, persona_scope: bool
) -> ProposalScope | None:
    """The scope a proposal may be stored in, or None to drop it: persona scope needs a persona
    and permission; a personal proposal is ``persona_user`` under a persona, else ``user``."""
    if proposal.scope is ProposalScope.PERSONA:
        return ProposalScope.PERSONA if persona_scope and job.persona_id else None
    return ProposalScope.PERSONA_USER if job.persona_id else ProposalScope.USER


def process_batch(
    jobs_with_receive_count: Iterable[ReceivedJob],
    extractor: Extractor,
    sink: ProposalSink,
    *,
    max_receives: int = 5,
    config_for: Callable[[TranscriptJob], ExtractionConfig] | None = None,
    should_stop: Callable[[], bool] | None = None,
) -> BatchOutcome:
    """Process received transcript jobs in order; see the module docstring for dispositions.

    ``config_for`` gives each job's persona settings (default: :class:`ExtractionConfig()`).
    ``should_stop`` is asked before each job (e.g. "less than N seconds of the Lambda left");
    once it says True, the remaining jobs are returned as ``retry`` without being attempted.
    The same happens after an ``ExtractionThrottled``: the extractor is not called again in
    this batch. Exceptions other than ExtractionError from the extractor and anything the sink
    raises (except MemoryDisabled / InvalidInput, which drop one proposal) fail only that job.
    """
    if max_receives < 1:
        raise ValueError("max_receives must be >= 1")
    outcome = BatchOutcome()
    halted: str | None = None
    for item in jobs_with_receive_count:
        if halted is None and should_stop is not None and should_stop():
            halted = "budget"
        if halted is not None:
            outcome.stopped_early = True
            outcome.results.append(
                JobOutcome(item.message_id, _job_id(item.body), "retry", f"not attempted: {halted}")
            )
            continue
        try:
            result = _process_one(
                item,
                extractor,
                sink,
                max_receives=max_receives,
                config_for=config_for,
                outcome=outcome,
            )
        except ExtractionThrottled as exc:
            job_id = _job_id(item.body)
            result = _failed(item, job_id, f"throttled: {exc.message}", max_receives)
            halted = "extractor throttled"
        outcome.results.append(result)
    return outcome


def _failed(item: ReceivedJob, job_id: str | None, reason: str, max_receives: int) -> JobOutcome:
    disposition: Disposition = "dead_letter" if item.receive_count >= max_receives else "retry"
    return JobOutcome(item.message_id, job_id, disposition, reason)


def _process_one(
    item: ReceivedJob,
    extractor: Extractor,
    sink: ProposalSink,
    *,
    max_receives: int,
    config_for: Callable[[TranscriptJob], ExtractionConfig] | None,
    outcome: BatchOutcome,
) -> JobOutcome:
    try:
        job = parse_job(item.body)
    except InvalidInput as exc:  # can never succeed: dead-letter at once, never drop silently
        reason = f"invalid message: {exc.message}"
        return JobOutcome(item.message_id, _job_id(item.body), "dead_letter", reason)

    try:
        if sink.is_erased(job.team_id, job.user_id, job.queued_at):
            return JobOutcome(item.message_id, job.job_id, "done", "erased")
        config = config_for(job) if config_for is not None else ExtractionConfig()
    except Exception as exc:  # a store outage fails this job only
        return _failed(item, job.job_id, f"lookup failed: {type(exc).__name__}", max_receives)
    if not config.enabled:
        return JobOutcome(item.message_id, job.job_id, "done", "extraction disabled")

    try:
        result: ExtractionResult = extractor.extract(
            job, persona_prompt=config.prompt, persona_scope=config.persona_scope
        )
    except ExtractionThrottled:
        raise  # process_batch records it and stops calling the extractor
    except ExtractionError as exc:
        return _failed(item, job.job_id, f"extraction failed: {exc.message}", max_receives)
    except Exception as exc:  # a bug/outage in one call
        return _failed(item, job.job_id, f"extraction crashed: {type(exc).__name__}", max_receives)
    if result.usage is not None:
        outcome.input_tokens += result.usage.input_tokens
        outcome.output_tokens += result.usage.output_tokens

    counts = {"created": 0, "refreshed": 0, "dropped": 0}
    try:
        # The erasure may have happened while the model was thinking: ask again.
        if result.proposals and sink.is_erased(job.team_id, job.user_id, job.queued_at):
            return JobOutcome(item.message_id, job.job_id, "done", "erased")
        _propose_all(job, result.proposals, sink, persona_scope=config.persona_scope, counts=counts)
    except Exception as exc:  # e.g. Unavailable: retry the job
        failed = _failed(item, job.job_id, f"store failed: {type(exc).__name__}", max_receives)
        return _counted(failed, counts)
    return _counted(JobOutcome(item.message_id, job.job_id, "done"), counts)


def _counted(outcome: JobOutcome, counts: dict[str, int]) -> JobOutcome:
    return replace(
        outcome,
        created=counts["created"],
        refreshed=counts["refreshed"],
        dropped=counts["dropped"],
    )


def _propose_all(
    job: TranscriptJob,
    proposals: Iterable[Proposal],
    sink: ProposalSink,
    *,
    persona_scope: bool,
    counts: dict[str, int],
) -> None:
    """Give the sink each proposal, in the scope the job allows (none: dropped), and count
    what the sink did in ``counts``; a proposal the sink refuses (memory off, bad input) is
    dropped, anything else it raises stops the loop with ``counts`` as far as it got."""
    for proposed in proposals:
        scope = effective_scope(proposed, job, persona_scope=persona_scope)
        if scope is None:
            counts["dropped"] += 1
            continue
        proposal = proposed
        if scope is not proposed.scope:
            proposal = proposed.model_copy(update={"scope": scope})
        try:
            verdict = sink.propose(job, proposal)
        except (MemoryDisabled, InvalidInput):
            verdict = "dropped"
        counts[verdict if verdict in ("created", "refreshed") else "dropped"] += 1


def _job_id(body: str | TranscriptJob) -> str | None:
    if isinstance(body, TranscriptJob):
        return body.job_id
    try:
        data = json.loads(body)
    except ValueError:
        return None
    job_id = data.get("jobId") if isinstance(data, dict) else None
    return job_id if isinstance(job_id, str) else None
