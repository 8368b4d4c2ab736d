"""The maintenance lease on a real redis-server and Redis Cluster: two invocations at once
never both run, the skipped schedule is done by the next holder, and a crashed holder's lease
expires."""

from __future__ import annotations

import threading
import time
from typing import Any

import pytest
from functions.maintenance import handler as maintenance_fn
from tests.integration.maintenance.conftest import World
from tests.support.services import RedisTarget

from engram.adapters.maintenance_lease import RedisMaintenanceLease
from engram.bootstrap.maintenance import build_maintenance_job
from engram.local.lambda_context import FakeLambdaContext

pytestmark = pytest.mark.integration


@pytest.fixture
def lease(redis_target: RedisTarget) -> RedisMaintenanceLease:
    return RedisMaintenanceLease(redis_target.client(), prefix="engram")


def test_the_lease_is_exclusive_expires_and_is_released_only_by_its_holder(
    lease: RedisMaintenanceLease,
) -> None:
    token = lease.acquire(60_000)
    assert token is not None
    assert lease.acquire(60_000) is None
    assert 0 < lease.client.pttl(lease.key) <= 60_000
    lease.release("not-the-holder")
    assert lease.holder() == token
    lease.release(token)
    assert lease.holder() is None

    crashed = lease.acquire(50)  # a holder that never releases
    assert crashed is not None
    deadline = time.monotonic() + 5
    while lease.holder() is not None and time.monotonic() < deadline:
        time.sleep(0.01)
    assert lease.acquire(60_000) is not None


def test_pending_schedules_are_taken_once(lease: RedisMaintenanceLease) -> None:
    lease.add_pending("daily")
    lease.add_pending("daily")
    lease.add_pending("frequent")
    assert lease.take_pending() == {"daily", "frequent"}
    assert lease.take_pending() == set()


def test_two_invocations_at_once_run_the_job_once_and_lose_no_schedule(world: World) -> None:
    started = threading.Event()
    finish = threading.Event()
    built: list[str] = []

    def build(container: Any, *, schedule: str) -> Any:
        built.append(schedule)
        job = build_maintenance_job(container, schedule=schedule)
        if len(built) == 1:  # the first run stays inside its job until told to finish

            class Slow:
                def run(self, *, remaining_ms: int | None = None) -> Any:
                    started.set()
                    assert finish.wait(30)
                    return job.run(remaining_ms=remaining_ms)

            return Slow()
        return job

    results: dict[str, Any] = {}

    def invoke(name: str, schedule: str) -> None:
        results[name] = maintenance_fn.run(
            {"engramSchedule": schedule},
            FakeLambdaContext(),
            container=world.container,
            build=build,
        )

    first = threading.Thread(target=invoke, args=("first", "frequent"))
    first.start()
    assert started.wait(30)
    invoke("second", "daily")  # while the first one runs
    finish.set()
    first.join(30)

    assert results["second"]["skipped"] is True
    assert results["first"]["state"]["runs"] == 1
    assert built == ["frequent"]  # the job was built (and run) once
    # the daily run that was skipped is done by the next run, whatever its own schedule
    third = maintenance_fn.run(
        {"engramSchedule": "frequent"},
        FakeLambdaContext(),
        container=world.container,
        build=build,
    )
    assert built == ["frequent", "daily"]
    assert third["tasks"]["retention"]["ran"] is True
    assert third["state"]["runs"] == 2
