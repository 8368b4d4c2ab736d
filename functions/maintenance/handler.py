"""The maintenance function: invoked by EventBridge every few minutes (``{"engramSchedule":
"frequent"}``) and daily (``{"engramSchedule": "daily"}``); locally by the dev server's timer.

One invocation builds the job from the process's container
(``engram.maintenance.wiring.build_maintenance_job``), runs it within the Lambda's remaining
time (``MaintenanceJob.run(remaining_ms=context.get_remaining_time_in_millis())``), emits every
count of the report as an EMF metric (namespace ``Engram``, dimension ``Schedule``) and
returns the report as camelCase JSON. A task's failure is in the report (``Errors`` metric),
never an exception; an exception here means the job could not even be built (configuration,
secrets) and the invocation fails, so EventBridge retries it and the Lambda error alarm fires.
See ``docs/operations.md``.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import TYPE_CHECKING, Any

from engram.adapters.observability import add_metric, instrument, logger, metrics
from engram.bootstrap import get_container
from engram.maintenance.wiring import DAILY, FREQUENT, build_maintenance_job

if TYPE_CHECKING:
    from engram.bootstrap import Container
    from engram.maintenance.job import MaintenanceJob

#: JMESPath of the correlation id: the EventBridge event id.
EVENT_ID = "id"

Builder = Callable[..., "MaintenanceJob"]


def schedule_of(event: Any) -> str:
    """``frequent``, ``daily``, or ``all`` (no or an unknown ``engramSchedule``: run every
    task, as the local timer does)."""
    raw = event.get("engramSchedule") if isinstance(event, dict) else None
    return raw if raw in (FREQUENT, DAILY) else "all"


def remaining_ms_of(context: Any) -> int | None:
    getter = getattr(context, "get_remaining_time_in_millis", None)
    if not callable(getter):
        return None
    value = getter()
    return int(value) if isinstance(value, int | float) else None


def run(
    event: Any,
    context: Any,
    *,
    container: Container | None = None,
    build: Builder | None = None,
) -> dict[str, Any]:
    """One run; ``container`` (default: the process's) and ``build`` (default:
    ``build_maintenance_job``) are for tests."""
    schedule = schedule_of(event)
    job = (build or build_maintenance_job)(container or get_container(), schedule=schedule)
    report = job.run(remaining_ms=remaining_ms_of(context))
    metrics().add_dimension(name="Schedule", value=schedule)
    for name, value in sorted(report.metrics().items()):
        add_metric(name, value)
    body: dict[str, Any] = report.model_dump(mode="json", by_alias=True)
    log = logger()
    summary = {
        "schedule": schedule,
        "cutOff": report.cut_off,
        "errors": report.errors,
        "tasks": {
            name: {"counts": t.counts, "error": t.error}
            for name, t in report.tasks.items()
            if t.ran or t.error
        },
    }
    if report.errors:
        log.warning("maintenance run finished with errors", extra=summary)
    else:
        log.info("maintenance run finished", extra=summary)
    return body


@instrument(correlation_id_path=EVENT_ID)
def handler(event: dict[str, Any], context: Any) -> dict[str, Any]:
    return run(event, context)
