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
from typing import TypeVar

from pydantic import ValidationError

from engram.clock import Clock
from engram.extraction.drain import ExtractionConfig, ReceivedJob, process_batch
from engram.extraction.models import Proposal, TranscriptJob
from engram.extraction.ports import Extractor, ProposalSink, SinkOutcome
from engram.identity import Caller, parse_identity_id
from engram.insights.ports import FactSource, InsightsStore
from engram.maintenance.budget import Budget, MonotonicClock
from engram.maintenance.models import (
    TASK_ORDER,
    ErasureCursor,
    InsightsCursor,
    MaintenanceConfig,
    MaintenanceReport,
    MaintenanceState,
    OffsetCursor,
    PolicyCursor,
    TaskName,
    TaskReport,
)
from engram.maintenance.ports import (
    BehaviourMaintenance,
    ErasureLog,
    MaintenanceStateStore,
    MemoryMaintenance,
    PersonaRetention,
    RetentionPolicySource,
    TranscriptQueue,
)
from engram.memories.ports import Embedder, EmbeddingBacklog
from engram.memories.reembed import reembed

T = TypeVar("T")


def identity_id(team_id: str, user_id: str) -> str:
    """The behavioural identity of a user (the same key the API uses)."""
    return Caller(user_id=user_id, team_id=team_id).identity_id


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


class _Stop(Exception):  # internal control flow, never escapes the job
    pass


class MaintenanceJob:
    """One object per Lambda container; call :meth:`run` once per scheduled invocation."""

    def __init__(
        self,
        *,
        clock: Clock,
        state: MaintenanceStateStore,
        behaviour: BehaviourMaintenance | None = None,
        memories: MemoryMaintenance | None = None,
        policies: RetentionPolicySource | None = None,
        erasures: ErasureLog | None = None,
        queue: TranscriptQueue | None = None,
        extractor: Extractor | None = None,
        sink: ProposalSink | None = None,
        extraction_config_for: Callable[[TranscriptJob], ExtractionConfig] | None = None,
        config: MaintenanceConfig | None = None,
        monotonic: Clock | None = None,
        facts: FactSource | None = None,
        insights: InsightsStore | None = None,
        embeddings: EmbeddingBacklog | None = None,
        embedder: Embedder | None = None,
    ) -> None:
        self._clock = clock
        self._facts = facts
        self._insights_store = insights
        self._backlog = embeddings
        self._embedder = embedder
        self._monotonic = monotonic or MonotonicClock()
        self._store = state
        self._behaviour = behaviour
        self._memories = memories
        self._policies = policies
        self._erasures = erasures
        self._queue = queue
        self._extractor = extractor
        self._sink = sink
        self._config_for = extraction_config_for
        self.config = config or MaintenanceConfig()

    # --- the run ------------------------------------------------------------------------------
    def run(self, *, remaining_ms: int | None = None) -> MaintenanceReport:
        """Run the tasks within ``min(remaining_ms, max_run_ms) - safety_margin_ms``.

        ``remaining_ms``: the Lambda's remaining time (``context.get_remaining_time_in_millis()``);
        None means ``max_run_ms``. Never raises for a task's failure: it is in the report."""
        cfg = self.config
        allowed = cfg.max_run_ms if remaining_ms is None else min(remaining_ms, cfg.max_run_ms)
        budget = Budget(self._monotonic, allowed - cfg.safety_margin_ms)
        now = self._clock.now_ms()
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
            except _Stop:
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
            finished_at_ms=self._clock.now_ms(),
            cut_off=cut_task is not None,
            tasks={name: reports[name] for name in TASK_ORDER},
            state=state.model_copy(deep=True),
            state_reset=reset,
        )

    def _configured(self, name: TaskName) -> bool:
        if name in ("prune", "sweep"):
            return self._behaviour is not None
        if name == "retention":
            return self._memories is not None and self._policies is not None
        if name == "erasure":
            return self._erasures is not None and (
                self._behaviour is not None or self._memories is not None
            )
        if name == "insights":
            return self._facts is not None and self._insights_store is not None
        if name == "embeddings":
            return self._backlog is not None and self._embedder is not None
        return self._queue is not None and self._extractor is not None and self._sink is not None

    def _run_task(
        self, name: TaskName, now: int, budget: Budget, state: MaintenanceState, rep: TaskReport
    ) -> None:
        if name == "prune":
            self._prune(now, budget, state.prune, rep, state)
        elif name == "sweep":
            self._sweep(now, budget, state.sweep, rep, state)
        elif name == "retention":
            self._retention(now, budget, state.retention, rep, state)
        elif name == "erasure":
            self._erasure(now, budget, state.erasure, rep, state)
        elif name == "insights":
            self._insights(now, budget, state.insights, rep, state)
        elif name == "embeddings":
            self._embeddings(budget, rep)
        else:
            self._extraction(budget, rep)

    def _load_state(self) -> tuple[MaintenanceState, bool]:
        raw = self._store.get()
        if raw is None:
            return MaintenanceState(), False
        try:
            return MaintenanceState.model_validate(raw), False
        except ValidationError:
            return MaintenanceState(), True  # unreadable: start a fresh cycle (all idempotent)

    def _save(self, state: MaintenanceState) -> None:
        self._store.set(state.to_json_dict())

    @staticmethod
    def _check(budget: Budget, rep: TaskReport) -> None:
        if budget.exhausted():
            rep.cut_off = True
            raise _Stop

    @staticmethod
    def _cap(rep: TaskReport, done: int, cap: int) -> int:
        """How many more items this task may take in this run (stops it at its cap)."""
        if done >= cap:
            rep.paused = True
            raise _Stop
        return cap - done

    # --- a. prune -----------------------------------------------------------------------------
    def _prune(
        self,
        now: int,
        budget: Budget,
        cur: OffsetCursor,
        rep: TaskReport,
        state: MaintenanceState,
    ) -> None:
        store = self._behaviour
        assert store is not None
        before = now - self.config.retention_ms

        def visit(ident: str) -> bool:
            rep.add("observationsPruned", store.prune(ident, before))
            return False

        self._walk_identities(
            budget,
            cur,
            rep,
            state,
            active_before_ms=None,
            cap=self.config.max_identities_per_run,
            visit=visit,
        )

    # --- b. sweep -----------------------------------------------------------------------------
    def _sweep(
        self,
        now: int,
        budget: Budget,
        cur: OffsetCursor,
        rep: TaskReport,
        state: MaintenanceState,
    ) -> None:
        store = self._behaviour
        assert store is not None

        def visit(ident: str) -> bool:
            rep.add("factsExpired", store.sweep_expired(ident, now))
            if store.remove_if_empty(ident):
                rep.add("identitiesRemoved")
                return True
            return False

        self._walk_identities(
            budget,
            cur,
            rep,
            state,
            active_before_ms=now - self.config.idle_ms,
            cap=self.config.max_swept_per_run,
            visit=visit,
        )

    def _walk_identities(
        self,
        budget: Budget,
        cur: OffsetCursor,
        rep: TaskReport,
        state: MaintenanceState,
        *,
        active_before_ms: int | None,
        cap: int,
        visit: Callable[[str], bool],
    ) -> None:
        """Page through the identity index from ``cur``, visiting each identity once per cycle;
        ``visit`` returns True when it removed the identity from the index."""
        store = self._behaviour
        assert store is not None
        done = 0
        while True:
            limit = min(self.config.page_size, self._cap(rep, done, cap))
            self._check(budget, rep)
            ids, nxt = store.list_identities(
                active_before_ms=active_before_ms, cursor=cur.cursor, limit=limit
            )
            for ident in ids:
                self._check(budget, rep)
                cur.cursor += 1  # past it before the call: a failing identity never blocks
                removed = visit(ident)
                rep.add("identities")
                done += 1
                if removed:
                    cur.cursor -= 1  # the rest of the index moved up by one
            if nxt == 0:
                cur.cursor = 0
                cur.cycle += 1
                rep.completed_cycle = True
                return
            self._save(state)

    # --- c. memory retention ------------------------------------------------------------------
    def _retention(
        self,
        now: int,
        budget: Budget,
        cur: PolicyCursor,
        rep: TaskReport,
        state: MaintenanceState,
    ) -> None:
        memories, policies = self._memories, self._policies
        assert memories is not None
        assert policies is not None
        cfg = self.config
        done = 0
        while True:
            limit = min(cfg.page_size, self._cap(rep, done, cfg.max_policies_per_run))
            self._check(budget, rep)
            page = list(policies.list_policies(after=cur.after, limit=limit))
            for policy in page:
                self._check(budget, rep)
                cur.after = policy.key
                done += 1
                if policy.persona_id is None:
                    counts = memories.apply_retention(
                        policy.team_id,
                        archive_after_days=policy.archive_after_days,
                        delete_archived_after_days=policy.delete_archived_after_days,
                        now=now,
                    )
                elif isinstance(memories, PersonaRetention):
                    counts = memories.apply_persona_retention(
                        policy.team_id,
                        policy.persona_id,
                        archive_after_days=policy.archive_after_days,
                        delete_archived_after_days=policy.delete_archived_after_days,
                        now=now,
                    )
                else:
                    rep.add("policiesUnsupported")
                    continue
                rep.add("policies")
                rep.add("memoriesArchived", counts.get("archived", 0))
                rep.add("memoriesDeleted", counts.get("deleted", 0))
            if len(page) < limit:
                cur.after = None
                cur.cycle += 1
                rep.completed_cycle = True
                return
            self._save(state)

    # --- d. erasure leftovers -----------------------------------------------------------------
    def _erasure(
        self,
        now: int,
        budget: Budget,
        cur: ErasureCursor,
        rep: TaskReport,
        state: MaintenanceState,
    ) -> None:
        log = self._erasures
        assert log is not None
        cfg = self.config
        done = 0
        while True:
            limit = min(cfg.page_size, self._cap(rep, done, cfg.max_erasures_per_run))
            self._check(budget, rep)
            page = list(log.pending_purges(after=cur.after, limit=limit))
            for record in page:
                self._check(budget, rep)
                cur.after = record.key
                done += 1
                ident = identity_id(record.team_id, record.user_id)
                if self._behaviour is not None:
                    rep.add(
                        "behaviourLeftovers",
                        self._behaviour.purge_leftovers(ident, record.erased_at_ms),
                    )
                if self._memories is not None:
                    rep.add(
                        "memoryLeftovers",
                        self._memories.purge_user_before(
                            record.team_id, record.user_id, record.erased_at_ms
                        ),
                    )
                rep.add("erasuresChecked")
                if now >= record.erased_at_ms + cfg.settle_ms:
                    log.mark_purged(record.team_id, record.user_id, record.erased_at_ms)
                    rep.add("erasuresSettled")
            if len(page) < limit:
                cur.after = None
                cur.cycle += 1
                rep.completed_cycle = True
                return
            self._save(state)

    # --- f. insights --------------------------------------------------------------------------
    def _insights(
        self,
        now: int,
        budget: Budget,
        cur: InsightsCursor,
        rep: TaskReport,
        state: MaintenanceState,
    ) -> None:
        facts, store = self._facts, self._insights_store
        assert facts is not None
        assert store is not None
        cfg = self.config
        done = 0
        while True:
            limit = min(cfg.page_size, self._cap(rep, done, cfg.max_insight_identities_per_run))
            self._check(budget, rep)
            ids, nxt = facts.identity_page(cur.cursor, limit)
            for ident in ids:
                self._check(budget, rep)  # a page cut short is read again: replacing is idempotent
                parsed = parse_identity_id(ident)
                if parsed is not None:
                    store.contribute(*parsed, facts.contributions(ident, now), cycle=cur.cycle)
                rep.add("identities")
                done += 1
            cur.cursor = nxt
            if not nxt:
                rep.add(
                    "rowsPublished",
                    store.publish(cycle=cur.cycle, min_users=cfg.insights_min_users, now_ms=now),
                )
                cur.cycle += 1
                rep.completed_cycle = True
                return
            self._save(state)

    # --- e. extraction ------------------------------------------------------------------------
    def _extraction(self, budget: Budget, rep: TaskReport) -> None:
        queue, extractor, sink = self._queue, self._extractor, self._sink
        assert queue is not None
        assert extractor is not None
        assert sink is not None
        if self._erasures is not None:
            sink = ErasureAwareSink(sink, self._erasures)
        cfg = self.config
        received = 0
        while True:
            want = min(cfg.receive_batch, self._cap(rep, received, cfg.max_jobs_per_run))
            self._check(budget, rep)
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
                config_for=self._config_for,
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
        assert self._backlog is not None
        assert self._embedder is not None
        result = reembed(
            self._backlog,
            self._embedder,
            batch_size=self.config.embedding_batch,
            keep_going=lambda: not budget.exhausted(),
        )
        rep.add("memoriesEmbedded", result.embedded)
        rep.add("memoriesChanged", result.skipped)
        rep.completed_cycle = result.done
        rep.cut_off = not result.done and budget.exhausted()
