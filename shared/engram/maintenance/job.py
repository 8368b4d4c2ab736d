"""The scheduled maintenance job: one run = a sequence of bounded tasks under one time budget.

Tasks (each optional: a task whose ports were not given is skipped):

* ``prune`` — every identity of the behavioural index, page by page: drop observations older
  than the retention (30 days);
* ``sweep`` — identities idle for ``sweep_idle_days``: delete their expired facts, and remove
  those with nothing left from the index;
* ``retention`` — explicit-memory retention per team / persona policy;
* ``erasure`` — re-erase what reappeared for erased users (late SQS deliveries) in both stores,
  until the erasure has settled;
* ``extraction`` — drain a bounded number of queued transcripts with the extraction policy;
* ``insights`` — every identity of the behavioural index, page by page: replace the user's
  contribution to their team's insights with their current facts; at the end of a pass,
  publish each team's aggregates (k-anonymous) and drop contributions of users no longer
  indexed (docs/insights.md).
* ``embeddings`` — embed, batch by batch, the memories not embedded with the configured
  embedder (saved before it was configured, while it was down, or with another embedder).

Before every step the job asks the budget; when it is spent the run stops, saves its cursors
and reports ``cutOff``; the next run starts with the task that was cut off, where it stopped.
Every step is idempotent, so a crash between a step and the saving of its cursor only repeats
that step. See ``docs/operations.md``.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass, field
from datetime import UTC, datetime
from typing import TypeVar

from pydantic import ValidationError

from engram.clock import MS_PER_DAY, Clock
from engram.extraction.drain import ExtractionConfig, ReceivedJob, process_batch
from engram.extraction.models import Proposal, TranscriptJob
from engram.extraction.ports import Extractor, ProposalSink, SinkOutcome
from engram.insights.ports import FactSource, InsightsStore
from engram.maintenance import tasks
from engram.maintenance.budget import Budget, MonotonicClock
from engram.maintenance.models import (
    TASK_ORDER,
    MaintenanceConfig,
    MaintenanceReport,
    MaintenanceState,
    TaskName,
    TaskReport,
)
from engram.maintenance.ports import (
    BehaviourMaintenance,
    ErasureLog,
    MaintenanceStateStore,
    MemoryMaintenance,
    RetentionPolicySource,
    TranscriptQueue,
)
from engram.maintenance.tasks import Stopped, TaskRun
from engram.memories.ports import Embedder, EmbeddingBacklog, HistoryRetention
from engram.memories.reembed import reembed

T = TypeVar("T")


class ErasureAwareSink:
    """A proposal sink whose erasure check also consults the erasure log."""

    def __init__(self, inner: ProposalSink, erasures: ErasureLog) -> None:
        self._inner = inner
        self._erasures = erasures

    def propose(self, job: TranscriptJob, proposal: Proposal) -> SinkOutcome:
        return self._inner.propose(job, proposal)

    def is_erased(self, team_id: str, user_id: str, since_ms: int) -> bool:
        return self._erasures.erased_since(team_id, user_id, since_ms) or self._inner.is_erased(
            team_id, user_id, since_ms
        )


@dataclass(kw_only=True, eq=False)
class MaintenanceJob:
    """One object per Lambda container; call :meth:`run` once per scheduled invocation. The
    ports are its fields; a task whose ports are None is skipped. ``monotonic`` is the clock
    of the time budget."""

    clock: Clock
    state: MaintenanceStateStore
    behaviour: BehaviourMaintenance | None = None
    memories: MemoryMaintenance | None = None
    policies: RetentionPolicySource | None = None
    erasures: ErasureLog | None = None
    queue: TranscriptQueue | None = None
    extractor: Extractor | None = None
    sink: ProposalSink | None = None
    extraction_config_for: Callable[[TranscriptJob], ExtractionConfig] | None = None
    config: MaintenanceConfig = field(default_factory=MaintenanceConfig)
    monotonic: Clock = field(default_factory=MonotonicClock)
    facts: FactSource | None = None
    insights: InsightsStore | None = None
    embeddings: EmbeddingBacklog | None = None
    embedder: Embedder | None = None
    history: HistoryRetention | None = None

    # --- the run ------------------------------------------------------------------------------
    def run(self, *, remaining_ms: int | None = None) -> MaintenanceReport:
        """Run the tasks within ``min(remaining_ms, max_run_ms) - safety_margin_ms``.

        ``remaining_ms``: the Lambda's remaining time (``context.get_remaining_time_in_millis()``);
        None means ``max_run_ms``. Never raises for a task's failure: it is in the report."""
        cfg = self.config
        allowed = cfg.max_run_ms if remaining_ms is None else min(remaining_ms, cfg.max_run_ms)
        budget = Budget(self.monotonic, allowed - cfg.safety_margin_ms)
        now = self.clock.now_ms()
        state, reset = self._load_state()
        state.runs += 1
        start = TASK_ORDER.index(state.next_task)
        order = TASK_ORDER[start:] + TASK_ORDER[:start]
        reports = {name: TaskReport(name=name) for name in TASK_ORDER}
        cut_task: TaskName | None = None
        for name in order:
            rep = reports[name]
            if cut_task is not None or not self._configured(name):
                continue
            if budget.exhausted():
                rep.cut_off = True
                cut_task = name
                continue
            rep.ran = True
            try:
                self._run_task(name, now, budget, state, rep)
            except Stopped:
                pass
            except Exception as exc:  # a dependency failed: report it, go on with the others
                rep.error = f"{type(exc).__name__}: {exc}"[:500]
            finally:
                self._save(state)
            if rep.cut_off:
                cut_task = name
        state.next_task = cut_task or TASK_ORDER[0]
        self._save(state)
        return MaintenanceReport(
            started_at_ms=now,
            finished_at_ms=self.clock.now_ms(),
            cut_off=cut_task is not None,
            tasks={name: reports[name] for name in TASK_ORDER},
            state=state.model_copy(deep=True),
            state_reset=reset,
        )

    def _configured(self, name: TaskName) -> bool:
        if name in ("prune", "sweep"):
            return self.behaviour is not None
        if name == "retention":
            return self.memories is not None and self.policies is not None
        if name == "erasure":
            return self.erasures is not None and (
                self.behaviour is not None or self.memories is not None
            )
        if name == "insights":
            return self.facts is not None and self.insights is not None
        if name == "embeddings":
            return self.embeddings is not None and self.embedder is not None
        return self.queue is not None and self.extractor is not None and self.sink is not None

    def _run_task(
        self, name: TaskName, now: int, budget: Budget, state: MaintenanceState, rep: TaskReport
    ) -> None:
        cfg = self.config
        run = TaskRun(budget, rep, lambda: self._save(state), cfg.page_size)
        if name == "prune":
            assert self.behaviour is not None
            before = now - cfg.retention_ms
            cap = cfg.max_identities_per_run
            tasks.prune(run, self.behaviour, state.prune, before_ms=before, cap=cap)
        elif name == "sweep":
            assert self.behaviour is not None
            idle_since, cap = now - cfg.idle_ms, cfg.max_swept_per_run
            tasks.sweep(
                run, self.behaviour, state.sweep, now_ms=now, idle_since_ms=idle_since, cap=cap
            )
        elif name == "retention":
            assert self.memories is not None
            assert self.policies is not None
            cap = cfg.max_policies_per_run
            tasks.retention(run, self.memories, self.policies, state.retention, now_ms=now, cap=cap)
            days = cfg.history_retention_days
            if self.history is not None and days is not None:
                ended = datetime.fromtimestamp((now - days * MS_PER_DAY) / 1000, UTC)
                purged = self.history.purge_history(ended, cfg.max_versions_purged_per_run)
                rep.add("versionsPurged", purged)
        elif name == "erasure":
            assert self.erasures is not None
            tasks.erasure(
                run,
                self.erasures,
                state.erasure,
                behaviour=self.behaviour,
                memories=self.memories,
                now_ms=now,
                settle_ms=cfg.settle_ms,
                cap=cfg.max_erasures_per_run,
            )
        elif name == "insights":
            assert self.facts is not None
            assert self.insights is not None
            tasks.insights(
                run,
                self.facts,
                self.insights,
                state.insights,
                now_ms=now,
                min_users=cfg.insights_min_users,
                cap=cfg.max_insight_identities_per_run,
            )
        elif name == "embeddings":
            self._embeddings(budget, rep)
        else:
            self._extraction(run)

    def _load_state(self) -> tuple[MaintenanceState, bool]:
        raw = self.state.get()
        if raw is None:
            return MaintenanceState(), False
        try:
            return MaintenanceState.model_validate(raw), False
        except ValidationError:
            return MaintenanceState(), True  # unreadable: start a fresh cycle (all idempotent)

    def _save(self, state: MaintenanceState) -> None:
        self.state.set(state.to_json_dict())

    # --- e. extraction ------------------------------------------------------------------------
    def _extraction(self, run: TaskRun) -> None:
        budget, rep = run.budget, run.rep
        queue, extractor, sink = self.queue, self.extractor, self.sink
        assert queue is not None
        assert extractor is not None
        assert sink is not None
        if self.erasures is not None:
            sink = ErasureAwareSink(sink, self.erasures)
        cfg = self.config
        received = 0
        while True:
            want = min(cfg.receive_batch, run.room(received, cfg.max_jobs_per_run))
            run.check()
            messages = queue.receive(want)
            if not messages:
                rep.completed_cycle = True
                return
            received += len(messages)
            rep.add("messagesReceived", len(messages))
            outcome = process_batch(
                [ReceivedJob(m.message_id, m.body, m.receive_count) for m in messages],
                extractor,
                sink,
                max_receives=cfg.max_receives,
                config_for=self.extraction_config_for,
                should_stop=budget.exhausted,
            )
            for message, result in zip(messages, outcome.results, strict=True):
                try:
                    if result.disposition == "done":
                        queue.delete(message.receipt)
                    elif result.disposition == "retry":
                        reason = result.reason or ""
                        delay = (
                            0
                            if reason == "not attempted: budget"
                            else cfg.retry_delay_s(message.receive_count)
                        )
                        queue.release(message.receipt, delay)
                    else:  # copied to the DLQ first: deleted only once it is safe there
                        queue.dead_letter(message, result.reason or "unknown")
                        queue.delete(message.receipt)
                except Exception:  # the message comes back after its visibility timeout
                    rep.add("ackErrors")
            for name, value in outcome.counts().items():
                rep.add(name, value)
            if outcome.stopped_early:
                if budget.exhausted():
                    rep.cut_off = True
                else:
                    rep.add("throttledStops")
                return

    # --- f. embeddings ------------------------------------------------------------------------
    def _embeddings(self, budget: Budget, rep: TaskReport) -> None:
        assert self.embeddings is not None
        assert self.embedder is not None
        result = reembed(
            self.embeddings,
            self.embedder,
            batch_size=self.config.embedding_batch,
            keep_going=lambda: not budget.exhausted(),
        )
        rep.add("memoriesEmbedded", result.embedded)
        rep.add("memoriesChanged", result.skipped)
        rep.completed_cycle = result.done
        rep.cut_off = not result.done and budget.exhausted()
