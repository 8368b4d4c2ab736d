"""The maintenance function: invoked by EventBridge every few minutes (``{"engramSchedule":
"frequent"}``) and daily (``{"engramSchedule": "daily"}``); locally by the dev server's timer.

One invocation takes the maintenance lease (``engram.maintenance.lease``: one run at a time;
a run that finds it taken records its schedule for the next holder and returns
``{"skipped": true, ...}`` with the metric ``SkippedLeaseHeld``), builds the job from the
process's container (``engram.bootstrap.maintenance.build_maintenance_job``), runs it within the
Lambda's remaining time (``MaintenanceJob.run(remaining_ms=...)``), emits every count of the
report as an EMF metric (namespace ``Engram``, dimension ``Schedule``) and returns the report
as camelCase JSON. A task's failure is in the report (``Errors`` metric),
never an exception; an exception here means the job could not even be built (configuration,
secrets) and the invocation fails, so EventBridge retries it and the Lambda error alarm fires.
See ``docs/operations.md``.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import TYPE_CHECKING, Any

from engram.adapters.lambda_runtime import remaining_ms_of
from engram.adapters.observability import add_metric, instrument, logger, metrics
from engram.bootstrap import get_container
from engram.bootstrap.maintenance import build_maintenance_job
from engram.maintenance.lease import GRACE_MS, run_serialised
from engram.maintenance.models import DAILY, FREQUENT

if TYPE_CHECKING:
    from engram.bootstrap import Container
    from engram.maintenance.job import MaintenanceJob
    from engram.maintenance.lease import LeaseState
    from engram.maintenance.models import MaintenanceReport
    from engram.maintenance.ports import MaintenanceLease

#: JMESPath of the correlation id: the EventBridge event id.
EVENT_ID = "id"

Builder = Callable[..., "MaintenanceJob"]


def schedule_of(event: Any) -> str:
    """``frequent``, ``daily``, or ``all`` (no or an unknown ``engramSchedule``: run every
    task, as the local timer does)."""
    raw = event.get("engramSchedule") if isinstance(event, dict) else None
    return raw if raw in (FREQUENT, DAILY) else "all"


def run(
    event: Any,
    context: Any,
    *,
    container: Container | None = None,
    build: Builder | None = None,
    lease: MaintenanceLease | None = None,
) -> dict[str, Any]:
    """One run; ``container`` (default: the process's), ``build`` (default:
    ``build_maintenance_job``) and ``lease`` (default: the container's) are for tests."""
    requested = schedule_of(event)
    container = container or get_container()
    remaining_ms = remaining_ms_of(context)
    limit_ms = (
        remaining_ms if remaining_ms is not None else container.settings.maintenance_max_run_ms
    )

    def job_run(schedule: str) -> MaintenanceReport:
        job = (build or build_maintenance_job)(container, schedule=schedule)
        return job.run(remaining_ms=remaining_ms)

    outcome = run_serialised(
        lease or container.maintenance_lease,
        schedule=requested,
        ttl_ms=limit_ms + GRACE_MS,
        run=job_run,
    )
    schedule = outcome.schedule
    metrics().add_dimension(name="Schedule", value=schedule)
    if outcome.result is None:
        return _skipped(schedule)
    report = outcome.result
    for name, value in sorted(report.metrics().items()):
        add_metric(name, value)
    _log_report(report, schedule=schedule, requested=requested, lease=outcome.lease)
    body: dict[str, Any] = report.model_dump(mode="json", by_alias=True)
    return body


def _skipped(schedule: str) -> dict[str, Any]:
    """The answer of a run that found the lease taken (its schedule is recorded for the
    holder)."""
    add_metric("SkippedLeaseHeld", 1)
    logger().info(
        "maintenance run skipped: another run holds the lease", extra={"schedule": schedule}
    )
    return {
        "skipped": True,
        "reason": "another maintenance run holds the lease",
        "schedule": schedule,
    }


def _log_report(
    report: MaintenanceReport, *, schedule: str, requested: str, lease: LeaseState
) -> None:
    """One log line per run: the counts and errors of every task that ran (a warning when any
    task failed)."""
    summary = {
        "schedule": schedule,
        "requestedSchedule": requested,
        "lease": lease,
        "cutOff": report.cut_off,
        "errors": report.errors,
        "tasks": {
            name: {"counts": t.counts, "error": t.error}
            for name, t in report.tasks.items()
            if t.ran or t.error
        },
    }
    if report.errors:
        logger().warning("maintenance run finished with errors", extra=summary)
    else:
        logger().info("maintenance run finished", extra=summary)


@instrument(correlation_id_path=EVENT_ID)
def handler(event: dict[str, Any], context: Any) -> dict[str, Any]:
    return run(event, context)
