"""The events function: invoked by an EventBridge schedule every minute; locally by the dev
server's timer.

One invocation publishes what the outbox holds (``engram.events.relay.OutboxRelay``), then
keeps polling every ``ENGRAM_EVENTS_POLL_MS`` for ``ENGRAM_EVENTS_RELAY_RUN_S`` seconds (never
past the Lambda's remaining time less a margin), so an event is on the bus about one poll
interval after its change committed. It emits the counts (``EventsSent``, ``EventsRefused``,
``EventsDead``, ``EventsPruned``) and the outbox's state (``OutboxDepth``, ``OutboxDeadEntries``,
``OutboxOldestAgeSeconds``) as EMF metrics (namespace ``Engram``), which the monitoring stack
alarms on. Relays running at once are safe: claims are leased and per aggregate.
"""

from __future__ import annotations

from typing import TYPE_CHECKING, Any

from engram.adapters.lambda_runtime import remaining_ms_of
from engram.adapters.observability import add_metric, instrument, logger

if TYPE_CHECKING:
    from engram.bootstrap import Container

#: JMESPath of the correlation id: the EventBridge event id.
EVENT_ID = "id"
#: the run stops this long before the Lambda's time is up
MARGIN_MS = 5_000


def run(event: Any, context: Any, *, container: Container | None = None) -> dict[str, Any]:
    """One run; ``event["runSeconds"]`` (an int) overrides how long it polls (0: drain once)."""
    if container is None:
        from engram.bootstrap import get_container

        container = get_container()
    settings = container.settings
    run_ms = settings.events_relay_run_s * 1000
    if isinstance(event, dict) and isinstance(event.get("runSeconds"), int):
        run_ms = max(0, event["runSeconds"]) * 1000
    remaining = remaining_ms_of(context)
    if remaining is not None:
        run_ms = max(0, min(run_ms, remaining - MARGIN_MS))
    relay = container.events_relay
    report = relay.run(for_ms=run_ms, poll_ms=settings.events_poll_ms)
    stats = relay.stats()
    add_metric("EventsSent", report.sent)
    add_metric("EventsRefused", report.refused)
    add_metric("EventsDead", report.dead)
    add_metric("EventsPruned", report.pruned)
    add_metric("OutboxDepth", stats.pending)
    add_metric("OutboxDeadEntries", stats.dead)
    add_metric("OutboxOldestAgeSeconds", stats.oldest_pending_age_s, unit="Seconds")
    body = {
        "sent": report.sent,
        "refused": report.refused,
        "dead": report.dead,
        "pruned": report.pruned,
        "requests": report.requests,
        "pending": stats.pending,
        "deadEntries": stats.dead,
        "oldestPendingAgeSeconds": stats.oldest_pending_age_s,
        "errors": report.errors[:10],
    }
    (logger().warning if report.errors or report.dead else logger().info)(
        "events relay run finished", extra=body
    )
    return body


@instrument(correlation_id_path=EVENT_ID)
def handler(event: dict[str, Any], context: Any) -> dict[str, Any]:
    return run(event, context)
