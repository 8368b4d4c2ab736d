"""The maintenance Lambda handler: schedule, time budget, EMF metrics, the report it returns."""

from __future__ import annotations

import json
from typing import Any

import pytest
from functions.maintenance import handler as module
from tests.unit.maintenance.fakes import (
    FakeBehaviour,
    FakeErasureLog,
    FakeLease,
    FakeMemories,
    FakeState,
)

from engram.bootstrap import Container, set_container
from engram.clock import FakeClock
from engram.maintenance import MaintenanceJob
from engram.settings import Settings

DAY = 86_400_000
T0 = 1_767_225_600_000 + 100 * DAY


class Context:
    function_name = "engram-test-maintenance"
    function_version = "$LATEST"
    memory_limit_in_mb = 1024
    invoked_function_arn = "arn:aws:lambda:us-east-1:000000000000:function:m"
    aws_request_id = "req-1"

    def __init__(self, remaining_ms: int) -> None:
        self.remaining_ms = remaining_ms

    def get_remaining_time_in_millis(self) -> int:
        return self.remaining_ms


class Spy:
    """Records what the handler asked for; builds a real job over fakes."""

    def __init__(self) -> None:
        self.calls: list[tuple[Any, str]] = []
        self.remaining: list[int | None] = []
        self.behaviour = FakeBehaviour()
        self.behaviour.add("t:u1", last_active=T0 - 40 * DAY, observations=[T0 - 35 * DAY])
        self.behaviour.add("t:u2", last_active=T0, observations=[T0 - DAY])

    def build(self, container: Any, *, schedule: str) -> Any:
        self.calls.append((container, schedule))
        job = MaintenanceJob(
            clock=FakeClock(T0),
            monotonic=FakeClock(0),
            state=FakeState(),
            behaviour=self.behaviour,
            memories=FakeMemories(),
            erasures=FakeErasureLog(),
        )
        spy = self

        class Recording:
            def run(self, *, remaining_ms: int | None = None) -> Any:
                spy.remaining.append(remaining_ms)
                return job.run(remaining_ms=remaining_ms)

        return Recording()


@pytest.fixture
def spy(monkeypatch: pytest.MonkeyPatch) -> Any:
    found = Spy()
    monkeypatch.setattr(module, "build_maintenance_job", found.build)
    old = set_container(Container(Settings()))
    yield found
    set_container(old)


def value(doc: dict[str, Any], name: str) -> float:
    raw = doc[name]
    return float(raw[-1]) if isinstance(raw, list) else float(raw)


def emf_lines(out: str) -> list[dict[str, Any]]:
    docs = []
    for line in out.splitlines():
        try:
            doc = json.loads(line)
        except ValueError:
            continue
        if isinstance(doc, dict) and "_aws" in doc:
            docs.append(doc)
    return docs


@pytest.mark.parametrize(
    ("event", "schedule"),
    [
        ({"engramSchedule": "frequent"}, "frequent"),
        ({"engramSchedule": "daily"}, "daily"),
        ({"detail-type": "Scheduled Event", "id": "x"}, "all"),
        ({"engramSchedule": "hourly"}, "all"),
    ],
)
def test_the_schedule_reaches_the_builder(spy: Spy, event: dict[str, Any], schedule: str) -> None:
    module.handler(event, Context(60_000))
    assert [s for _, s in spy.calls] == [schedule]


def test_runs_within_the_remaining_time_and_returns_the_report(
    spy: Spy, capsys: pytest.CaptureFixture[str]
) -> None:
    body = module.handler({"engramSchedule": "frequent", "id": "evt-1"}, Context(123_456))
    assert spy.remaining == [123_456]
    assert body["cutOff"] is False
    assert body["tasks"]["prune"]["counts"] == {"observationsPruned": 1, "identities": 2}
    assert body["state"]["runs"] == 1
    json.dumps(body)  # JSON-ready

    docs = emf_lines(capsys.readouterr().out)
    metrics_doc = next(d for d in docs if "PruneObservationsPruned" in d)
    assert value(metrics_doc, "PruneObservationsPruned") == 1
    assert value(metrics_doc, "PruneIdentities") == 2
    assert value(metrics_doc, "CutOff") == 0
    assert value(metrics_doc, "Errors") == 0
    assert metrics_doc["Schedule"] == "frequent"
    names = {m["Name"] for m in metrics_doc["_aws"]["CloudWatchMetrics"][0]["Metrics"]}
    assert {"PruneObservationsPruned", "SweepIdentities", "ErasureCycleCompleted"} <= names


def test_a_spent_budget_stops_the_run_and_says_so(
    spy: Spy, capsys: pytest.CaptureFixture[str]
) -> None:
    body = module.handler({"engramSchedule": "daily"}, Context(5_000))  # < safety margin
    assert body["cutOff"] is True
    assert body["tasks"]["prune"]["ran"] is False
    assert body["state"]["nextTask"] == "prune"
    assert spy.behaviour.pruned == []
    doc = next(d for d in emf_lines(capsys.readouterr().out) if "CutOff" in d)
    assert value(doc, "CutOff") == 1


def test_a_failing_task_is_reported_not_raised(
    spy: Spy, capsys: pytest.CaptureFixture[str]
) -> None:
    spy.behaviour.fail_prune.add("t:u1")
    body = module.handler({"engramSchedule": "frequent"}, Context(60_000))
    assert body["tasks"]["prune"]["error"]
    assert body["tasks"]["sweep"]["ran"] is True
    doc = next(d for d in emf_lines(capsys.readouterr().out) if "Errors" in d)
    assert value(doc, "Errors") == 1


def test_a_job_that_cannot_be_built_fails_the_invocation(monkeypatch: pytest.MonkeyPatch) -> None:
    def broken(container: Any, *, schedule: str) -> Any:
        raise RuntimeError("no database configured")

    monkeypatch.setattr(module, "build_maintenance_job", broken)
    old = set_container(Container(Settings()))
    try:
        with pytest.raises(RuntimeError, match="no database"):
            module.handler({"engramSchedule": "daily"}, Context(60_000))
    finally:
        set_container(old)


def test_a_run_takes_the_lease_for_its_remaining_time_plus_grace(spy: Spy) -> None:
    from engram.maintenance.lease import GRACE_MS

    lease = FakeLease()
    module.run({"engramSchedule": "frequent"}, Context(200_000), lease=lease)
    assert lease.ttls == [200_000 + GRACE_MS]
    assert lease.holder is None


def test_a_run_that_finds_the_lease_taken_is_skipped_and_says_so(
    spy: Spy, capsys: pytest.CaptureFixture[str]
) -> None:
    lease = FakeLease()
    lease.holder = "a-long-run"
    set_container(Container(Settings(), maintenance_lease=lease))  # the spy puts the old back
    body = module.handler({"engramSchedule": "daily"}, Context(60_000))
    assert body == {
        "skipped": True,
        "reason": "another maintenance run holds the lease",
        "schedule": "daily",
    }
    assert spy.calls == []  # no job was even built
    assert lease.pending == {"daily"}
    docs = emf_lines(capsys.readouterr().out)
    assert value(next(d for d in docs if "SkippedLeaseHeld" in d), "SkippedLeaseHeld") == 1
    # the next run to get the lease does the daily work
    lease.holder = None
    module.handler({"engramSchedule": "frequent"}, Context(60_000))
    assert [s for _, s in spy.calls] == ["daily"]
