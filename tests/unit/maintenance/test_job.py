"""The maintenance job through its public surface, with in-memory fakes and fake clocks."""

from __future__ import annotations

import json
from typing import Any

import pytest
from tests.unit.maintenance.fakes import (
    DAY,
    FakeBehaviour,
    FakeErasureLog,
    FakeMemories,
    FakePersonaMemories,
    FakePolicies,
    FakeQueue,
    FakeSink,
    FakeState,
    Row,
)

from engram.clock import FakeClock
from engram.extraction import ExtractionError, ExtractionResult, RuleBasedExtractor, TranscriptJob
from engram.maintenance import (
    MaintenanceConfig,
    MaintenanceJob,
    MaintenanceReport,
    RetentionPolicy,
)

T0 = 1_767_225_600_000 + 100 * DAY
SECOND = 1000


class Harness:
    """A job over fakes; ``spend_ms`` of monotonic time passes at every store call."""

    def __init__(self, *, spend_ms: int = 0, **config: Any) -> None:
        self.clock = FakeClock(T0)
        self.mono = FakeClock(0)
        self.spend_ms = spend_ms
        self.state = FakeState()
        self.behaviour = FakeBehaviour(tick=self._tick)
        self.memories: FakeMemories = FakeMemories()
        self.policies = FakePolicies([])
        self.erasures = FakeErasureLog()
        self.queue = FakeQueue(self.clock.now_ms)
        self.sink = FakeSink()
        self.extractor: Any = RuleBasedExtractor()
        self.config = MaintenanceConfig(safety_margin_ms=0, **config)

    def _tick(self) -> None:
        self.mono.advance(ms=self.spend_ms)

    def job(self) -> MaintenanceJob:
        return MaintenanceJob(
            clock=self.clock,
            monotonic=self.mono,
            state=self.state,
            behaviour=self.behaviour,
            memories=self.memories,
            policies=self.policies,
            erasures=self.erasures,
            queue=self.queue,
            extractor=self.extractor,
            sink=self.sink,
            config=self.config,
        )

    def run(self, remaining_ms: int | None = None) -> MaintenanceReport:
        return self.job().run(remaining_ms=remaining_ms)

    def snapshot(self) -> tuple[Any, ...]:
        return (
            self.behaviour.snapshot(),
            self.memories.snapshot(),
            self.erasures.snapshot(),
            sorted(self.queue.messages),
            list(self.queue.dead),
            dict(self.sink.created),
        )


def transcript(job_id: str, text: str, *, user: str = "u1", queued_at: int = T0) -> str:
    return TranscriptJob.model_validate(
        {
            "jobId": job_id,
            "conversationId": f"conv-{job_id}",
            "teamId": "t1",
            "userId": user,
            "messages": [{"role": "user", "content": text}],
            "queuedAt": queued_at,
        }
    ).to_json()


# --- a. prune -----------------------------------------------------------------------------------


def test_prune_drops_observations_older_than_retention_for_every_identity() -> None:
    h = Harness(page_size=3)
    for i in range(7):
        h.behaviour.add(
            f"t1:u{i}", last_active=T0 - i * DAY, observations=[T0 - 40 * DAY, T0 - 29 * DAY]
        )

    report = h.run()

    assert all(v.observations == [T0 - 29 * DAY] for v in h.behaviour.ids.values())
    prune = report.tasks["prune"]
    assert prune.counts == {"observationsPruned": 7, "identities": 7}
    assert prune.completed_cycle
    assert not prune.cut_off
    assert report.state.prune.cursor == 0
    assert report.state.prune.cycle == 1


def test_a_run_cut_off_by_its_budget_resumes_where_it_stopped() -> None:
    h = Harness(spend_ms=SECOND, page_size=4)
    ids = [f"t1:u{i:02d}" for i in range(23)]
    for n, ident in enumerate(ids):
        h.behaviour.add(ident, last_active=T0 - DAY + n, observations=[T0 - 31 * DAY])

    first = h.run(remaining_ms=10 * SECOND)

    assert first.cut_off
    assert first.tasks["prune"].cut_off
    covered = list(h.behaviour.pruned)
    assert 0 < len(covered) < len(ids)
    assert first.state.prune.cursor == len(covered)
    assert first.state.next_task == "prune"
    assert not any(first.tasks[t].ran for t in ("sweep", "retention", "erasure", "extraction"))

    runs = 1
    while True:
        report = h.run(remaining_ms=10 * SECOND)
        runs += 1
        if report.tasks["prune"].completed_cycle:
            break
        assert runs < 20
    assert runs >= 3
    # together the runs covered every identity exactly once in this cycle, in index order
    assert h.behaviour.pruned == ids
    assert all(v.observations == [] for v in h.behaviour.ids.values())
    assert report.state.prune.cycle == 1
    assert report.state.prune.cursor == 0
    # the next cycle starts again from the first identity
    h.run()
    assert h.behaviour.pruned[len(ids) :] == ids


def test_per_task_cap_pauses_a_task_and_leaves_time_to_the_others() -> None:
    h = Harness(page_size=4, max_identities_per_run=6)
    for i in range(10):
        h.behaviour.add(f"t1:u{i}", last_active=T0 - i, observations=[T0 - 31 * DAY])
    h.queue.send(transcript("j1", "I prefer dark mode"))

    report = h.run()

    assert report.tasks["prune"].paused
    assert not report.cut_off
    assert report.tasks["prune"].counts["identities"] == 6
    assert report.state.prune.cursor == 6
    assert report.tasks["extraction"].counts["jobsDone"] == 1
    second = h.run()
    assert second.tasks["prune"].completed_cycle
    assert len(h.behaviour.pruned) == 10
    assert len(set(h.behaviour.pruned)) == 10


# --- b. sweep -----------------------------------------------------------------------------------


def test_sweep_expires_facts_of_idle_identities_and_removes_the_empty_ones() -> None:
    h = Harness(page_size=2, sweep_idle_days=7)
    # six idle identities: four end up empty (removed from the index), two keep something
    for i in range(6):
        facts = {"fact:a": T0 - DAY}
        obs = [T0 - 10 * DAY] if i in (1, 4) else []
        h.behaviour.add(f"t1:idle{i}", last_active=T0 - 20 * DAY + i, observations=obs, facts=facts)
    h.behaviour.add("t1:active", last_active=T0 - DAY, facts={"fact:a": T0 - DAY})

    report = h.run()

    sweep = report.tasks["sweep"]
    assert sweep.completed_cycle
    assert sorted(h.behaviour.swept) == [f"t1:idle{i}" for i in range(6)]  # each exactly once
    assert sweep.counts == {"factsExpired": 6, "identities": 6, "identitiesRemoved": 4}
    assert sorted(h.behaviour.ids) == ["t1:active", "t1:idle1", "t1:idle4"]
    assert h.behaviour.ids["t1:active"].facts == {"fact:a": T0 - DAY}  # not idle: untouched
    assert h.behaviour.ids["t1:idle1"].facts == {}


# --- c. retention -------------------------------------------------------------------------------


def test_retention_archives_and_deletes_per_team_and_persona_policy() -> None:
    h = Harness()
    h.memories = FakePersonaMemories()
    h.policies = FakePolicies(
        [
            RetentionPolicy(team_id="t1", archive_after_days=90, delete_archived_after_days=30),
            RetentionPolicy(team_id="t2", persona_id="p", archive_after_days=10),
        ]
    )
    rows = h.memories.rows
    rows["old"] = Row("t1", "u1", None, "active", T0 - 200 * DAY, T0 - 91 * DAY)
    rows["fresh"] = Row("t1", "u1", None, "active", T0 - 200 * DAY, T0 - 89 * DAY)
    rows["stale-archived"] = Row("t1", "u1", None, "archived", T0 - 200 * DAY, T0 - 31 * DAY)
    rows["p-old"] = Row("t2", "u2", "p", "active", T0 - 20 * DAY, T0 - 11 * DAY)
    rows["q-old"] = Row("t2", "u2", "q", "active", T0 - 20 * DAY, T0 - 11 * DAY)

    report = h.run()

    assert report.tasks["retention"].counts == {
        "policies": 2,
        "memoriesArchived": 2,
        "memoriesDeleted": 1,
    }
    assert {k: r.status for k, r in rows.items()} == {
        "old": "archived",
        "fresh": "active",
        "p-old": "archived",
        "q-old": "active",  # another persona: its policy does not apply
    }


def test_a_persona_policy_the_memory_port_cannot_apply_is_reported_not_guessed() -> None:
    h = Harness()
    h.policies = FakePolicies([RetentionPolicy(team_id="t2", persona_id="p", archive_after_days=1)])
    h.memories.rows["r"] = Row("t2", "u2", "p", "active", T0 - 20 * DAY, T0 - 11 * DAY)

    report = h.run()

    assert report.tasks["retention"].counts == {"policiesUnsupported": 1}
    assert h.memories.rows["r"].status == "active"


# --- d. erasure leftovers -----------------------------------------------------------------------


def test_leftovers_of_an_erased_user_are_removed_until_the_erasure_settles() -> None:
    h = Harness(erasure_settle_days=14)
    erased_at = T0 - 2 * DAY
    h.erasures.record("t1", "gone", erased_at)
    h.erasures.record("t1", "back", erased_at)
    # a late SQS delivery recreated the erased identity with a pre-erasure observation
    h.behaviour.add("t1:gone", last_active=T0 - DAY, observations=[erased_at - 5 * DAY])
    # this user came back: pre-erasure leftovers go, what they did afterwards stays
    h.behaviour.add("t1:back", last_active=T0, observations=[erased_at - DAY, erased_at + DAY])
    h.memories.rows["late"] = Row("t1", "gone", None, "active", erased_at - 1, T0 - DAY)
    h.memories.rows["new"] = Row("t1", "back", None, "active", erased_at + DAY, erased_at + DAY)

    report = h.run()

    assert "t1:gone" not in h.behaviour.ids
    assert h.behaviour.ids["t1:back"].observations == [erased_at + DAY]
    assert sorted(h.memories.rows) == ["new"]
    assert report.tasks["erasure"].counts == {
        "behaviourLeftovers": 2,
        "memoryLeftovers": 1,
        "erasuresChecked": 2,
    }
    assert not any(h.erasures.records.values())  # still inside the settle window

    h.clock.advance(days=13)
    h.behaviour.add("t1:gone", last_active=h.clock.now_ms(), observations=[erased_at - 1])
    h.run()
    assert "t1:gone" not in h.behaviour.ids
    assert all(h.erasures.records.values())  # settled: no longer pending
    report = h.run()
    assert report.tasks["erasure"].counts == {}


# --- e. extraction ------------------------------------------------------------------------------


def test_extraction_acks_done_jobs_and_skips_users_erased_after_queueing() -> None:
    h = Harness()
    h.queue.send(transcript("j1", "I prefer dark mode"))
    h.queue.send(transcript("j2", "I prefer tea", user="erased", queued_at=T0 - DAY))
    h.queue.send("{not json")
    h.erasures.record("t1", "erased", T0 - DAY + 1)

    report = h.run()

    ext = report.tasks["extraction"]
    assert ext.counts["messagesReceived"] == 3
    assert ext.counts["jobsDone"] == 2
    assert ext.counts["jobsSkippedErased"] == 1
    assert ext.counts["jobsDeadLettered"] == 1
    assert list(h.sink.created) == [("t1", "u1", next(iter(h.sink.created))[2])]
    assert not any(user == "erased" for _, user, _ in h.sink.created)
    assert h.queue.messages == {}  # two deleted, the invalid one dead-lettered then deleted
    assert [mid for mid, _ in h.queue.dead] == ["m3"]
    assert ext.completed_cycle


class BrokenExtractor:
    def extract(
        self, job: TranscriptJob, *, persona_prompt: str | None, persona_scope: bool
    ) -> ExtractionResult:
        raise ExtractionError("model answered nonsense")


def test_failed_jobs_go_back_with_backoff_and_are_dead_lettered_after_max_receives() -> None:
    h = Harness(max_receives=3, retry_base_delay_s=30)
    h.extractor = BrokenExtractor()
    h.queue.send(transcript("j1", "I prefer dark mode"))

    for _ in range(3):
        h.run()
        h.clock.advance(seconds=3600)

    assert h.queue.releases == [("m1", 30), ("m1", 60)]
    assert h.queue.dead == [("m1", "extraction failed: model answered nonsense")]
    assert h.queue.messages == {}  # never lost: it is in the dead-letter queue


def test_budget_spent_during_extraction_returns_unattempted_jobs_at_once() -> None:
    h = Harness()
    for i in range(4):
        h.queue.send(transcript(f"j{i}", f"I prefer colour number {i}"))

    class SlowExtractor(RuleBasedExtractor):
        def extract(
            self, job: TranscriptJob, *, persona_prompt: str | None, persona_scope: bool
        ) -> ExtractionResult:
            h.mono.advance(seconds=4)
            return super().extract(job, persona_prompt=persona_prompt, persona_scope=persona_scope)

    h.extractor = SlowExtractor()
    report = h.run(remaining_ms=10 * SECOND)

    ext = report.tasks["extraction"]
    assert report.cut_off
    assert ext.cut_off
    assert ext.counts["jobsDone"] == 3
    assert ext.counts["jobsRetried"] == 1
    assert h.queue.releases == [("m4", 0)]
    assert report.state.next_task == "extraction"


# --- the whole run ------------------------------------------------------------------------------


def populate(h: Harness) -> None:
    h.memories = FakePersonaMemories()
    h.policies = FakePolicies(
        [
            RetentionPolicy(team_id="t1", archive_after_days=30, delete_archived_after_days=30),
            RetentionPolicy(team_id="t1", persona_id="p", archive_after_days=5),
        ]
    )
    for i in range(9):
        h.behaviour.add(
            f"t1:u{i}",
            last_active=T0 - i * 3 * DAY,
            observations=[T0 - 35 * DAY, T0 - i * 3 * DAY],
            facts={"fact:x": T0 - DAY if i % 2 else T0 + DAY},
        )
    h.memories.rows["a"] = Row("t1", "u1", None, "active", T0 - 90 * DAY, T0 - 31 * DAY)
    h.memories.rows["b"] = Row("t1", "u1", None, "archived", T0 - 90 * DAY, T0 - 31 * DAY)
    h.memories.rows["c"] = Row("t1", "u2", "p", "active", T0 - 9 * DAY, T0 - 6 * DAY)
    h.erasures.record("t1", "u8", T0 - DAY)
    h.queue.send(transcript("j1", "I prefer dark mode. Call me Sam."))
    h.queue.send("[]")


def test_running_the_job_twice_in_a_row_changes_nothing_the_second_time() -> None:
    h = Harness(page_size=2)
    populate(h)
    before = h.snapshot()

    first = h.run()
    after_first = h.snapshot()
    second = h.run()

    assert after_first != before
    assert not first.cut_off
    assert first.errors == 0
    assert h.snapshot() == after_first
    changes = {
        name: {k: v for k, v in task.counts.items() if v} for name, task in second.tasks.items()
    }
    assert changes == {
        "prune": {"identities": 8},  # visited again, nothing to prune
        "sweep": {"identities": 5},  # idle, not empty (recent observations): nothing expires
        "retention": {"policies": 2},
        "erasure": {"erasuresChecked": 1},  # still settling, nothing left to purge
        "extraction": {},
        "insights": {},  # not configured here (tests/integration/functions: insights routes)
        "embeddings": {},
    }


def test_a_failing_store_fails_its_task_only_and_the_next_run_goes_past_it() -> None:
    h = Harness()
    for i in range(3):
        h.behaviour.add(f"t1:u{i}", last_active=T0 - i, observations=[T0 - 31 * DAY])
    h.behaviour.fail_prune.add("t1:u1")
    h.queue.send(transcript("j1", "I prefer dark mode"))

    report = h.run()

    assert report.tasks["prune"].error == "ConnectionError: store down for t1:u1"
    assert report.errors == 1
    assert report.metrics()["Errors"] == 1
    assert report.tasks["extraction"].counts["jobsDone"] == 1
    h.behaviour.fail_prune.clear()
    h.run()
    assert h.behaviour.pruned == ["t1:u2", "t1:u0"]


def test_unreadable_state_starts_a_fresh_cycle() -> None:
    h = Harness()
    h.state.value = {"version": 99, "prune": "garbage"}
    h.behaviour.add("t1:u", last_active=T0, observations=[T0 - 31 * DAY])

    report = h.run()

    assert report.state_reset
    assert report.tasks["prune"].completed_cycle
    assert h.state.value is not None
    assert h.state.value["prune"] == {"cursor": 0, "cycle": 1}


def test_report_serialises_to_camel_case_json_and_flat_metrics() -> None:
    h = Harness()
    h.behaviour.add("t1:u", last_active=T0, observations=[T0 - 31 * DAY])

    report = h.run()

    doc = json.loads(report.model_dump_json(by_alias=True))
    assert doc["cutOff"] is False
    assert doc["tasks"]["prune"]["counts"] == {"observationsPruned": 1, "identities": 1}
    assert doc["state"]["nextTask"] == "prune"
    metrics = report.metrics()
    assert metrics["PruneObservationsPruned"] == 1
    assert metrics["PruneCycleCompleted"] == 1
    assert metrics["CutOff"] == 0


def test_tasks_without_their_ports_are_skipped() -> None:
    clock = FakeClock(T0)
    job = MaintenanceJob(clock=clock, state=FakeState(), monotonic=clock)
    report = job.run(remaining_ms=60_000)
    assert not any(t.ran for t in report.tasks.values())
    assert not report.cut_off


@pytest.mark.parametrize("remaining", [0, 5_000])
def test_no_budget_left_means_nothing_is_touched(remaining: int) -> None:
    h = Harness()
    h.config = MaintenanceConfig(safety_margin_ms=10_000)
    h.behaviour.add("t1:u", last_active=T0, observations=[T0 - 31 * DAY])

    report = h.run(remaining_ms=remaining)

    assert report.cut_off
    assert report.tasks["prune"].cut_off
    assert h.behaviour.pruned == []
    assert report.state.next_task == "prune"
