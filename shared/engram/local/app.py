"""What ``engram serve`` runs: the route table and the background pieces around it.

``build_app(settings, handlers=...)`` wires every route of the route table
(``engram.api.routes.ROUTES``) to the very Lambda handler that serves it in AWS, keyed by the
same route keys API Gateway uses. The handlers are given, by function name
(``FunctionHandlers``): ``engram`` imports no function — the functions are built on it — so the
composition that imports ``functions/<function>/handler.py`` lives in ``functions.local`` (the
``engram`` command starts there and hands them to ``engram serve``).
Around them:

* the ingest queue: a ``LocalQueue`` whose consumer is the ``ingest_consumer`` handler
  (SQS-shaped events, partial batch failures retried with backoff, 5 receives, a dead-letter
  list), durable under ``<data_dir>/queues/`` (a 202 means the record is on disk; after a
  crash the next ``engram serve`` redelivers whatever was queued or in flight);
* the extraction queue: a durable ``LocalQueue`` without a consumer — the maintenance job pulls
  from it;
* the maintenance job on a ``Periodic`` timer every ``Settings.maintenance_interval_s`` —
  the ``maintenance`` callable given, else the ``maintenance`` handler (when given) called
  with an EventBridge scheduled event (``maintenance_job``);
* the event relay on a ``Periodic`` timer every ``Settings.events_poll_ms``: the outbox
  published to ``<data_dir>/events.jsonl`` (and ``ENGRAM_EVENTS_WEBHOOK_URL`` when set), as
  the events function publishes it to EventBridge;
* one ``engram.bootstrap.Container`` (installed with ``set_container``) holding Redis, the
  database URL and the queue senders, so the handlers' ``get_container()`` finds it.

Nothing starts in ``build_app``; ``LocalApp.start()`` starts the queue worker and the timer and
registers their drain hooks (the server runs them on Ctrl-C, after in-flight requests).
``GET /v1/health`` is the memories handler's (real Redis and PostgreSQL probes) when a
container is given; otherwise it is the probe-only handler below, fed by ``probes``.
"""

from __future__ import annotations

import json
import logging
from collections.abc import Callable, Mapping
from dataclasses import dataclass, field
from typing import Any

from engram import __version__
from engram.api.mcp_routes import MCP_FUNCTION, MCP_ROUTES
from engram.api.models import DependencyStatus, HealthResponse
from engram.api.routes import HTTP_FUNCTIONS, ROUTES, routes_of
from engram.bootstrap import Container, set_container
from engram.local.gateway import RouteTable
from engram.local.lambda_context import FakeLambdaContext, LambdaHandler
from engram.local.pullqueue import receiver_for
from engram.local.scheduler import Periodic
from engram.local.sqs import DEFAULT_MAX_RECEIVE_COUNT, LocalQueue, LocalSqs, queue_path
from engram.settings import Settings

_log = logging.getLogger("engram.local.app")

#: A dependency probe: returns normally when the dependency answers, raises otherwise.
Probe = Callable[[], object]


def _probe(probe: Probe | None) -> DependencyStatus:
    if probe is None:
        return "unknown"
    try:
        return "down" if probe() is False else "ok"
    except Exception:
        _log.warning("health probe failed", exc_info=True)
        return "down"


def make_health_handler(
    *, redis: Probe | None = None, postgres: Probe | None = None
) -> LambdaHandler:
    """``GET /v1/health``: 200 ``{"status": "ok"|"degraded", "version", "redis", "postgres"}``.

    ``status`` is ``degraded`` when a configured probe fails; an unconfigured dependency is
    ``unknown`` and does not degrade the status.
    """

    def handler(event: dict[str, Any], context: Any) -> dict[str, Any]:
        redis_status, pg_status = _probe(redis), _probe(postgres)
        body = HealthResponse(
            status="degraded" if "down" in (redis_status, pg_status) else "ok",
            version=__version__,
            redis=redis_status,
            postgres=pg_status,
        )
        return {
            "statusCode": 200,
            "headers": {"Content-Type": "application/json", "Cache-Control": "no-store"},
            "body": json.dumps(body.model_dump(mode="json")),
            "isBase64Encoded": False,
        }

    return handler


#: Which function serves which route (derived from the route table, as infra/ maps them).
FUNCTION_ROUTES: dict[str, tuple[str, ...]] = {
    function: tuple(r.route_key for r in routes_of(function)) for function in HTTP_FUNCTIONS
}
INGEST_QUEUE = "engram-ingest"
EXTRACTION_QUEUE = "engram-extraction"


#: The Lambda handlers ``engram serve`` runs, by function name (``functions/<name>/handler.py``'s
#: ``handler``): every HTTP function of the route table, the MCP function and ``ingest_consumer``
#: (``REQUIRED_FUNCTIONS``); ``maintenance`` too, to run it on its timer.
FunctionHandlers = Mapping[str, LambdaHandler]
REQUIRED_FUNCTIONS: tuple[str, ...] = (*HTTP_FUNCTIONS, MCP_FUNCTION, "ingest_consumer")
MAINTENANCE_FUNCTION = "maintenance"


def _checked(handlers: FunctionHandlers) -> FunctionHandlers:
    missing = [name for name in REQUIRED_FUNCTIONS if name not in handlers]
    if missing:
        raise ValueError(f"the local app needs the handlers of the functions {missing}")
    return handlers


def maintenance_job(handler: LambdaHandler) -> Callable[[], object]:
    """The maintenance function's ``handler`` as a no-argument job: called with the scheduled
    event EventBridge sends it."""

    def run() -> object:
        event = {
            "version": "0",
            "id": "local-schedule",
            "detail-type": "Scheduled Event",
            "source": "aws.events",
            "account": "000000000000",
            "region": "us-east-1",
            "resources": ["arn:aws:events:us-east-1:000000000000:rule/engram-maintenance"],
            "detail": {},
        }
        return handler(event, FakeLambdaContext(function_name="engram-maintenance"))

    return run


@dataclass
class LocalApp:
    """The route table plus the background pieces ``engram serve`` runs around it."""

    routes: RouteTable
    drain_hooks: list[Callable[[], object]] = field(default_factory=list)
    container: Container | None = None
    sqs: LocalSqs | None = None
    ingest_queue: LocalQueue | None = None
    extraction_queue: LocalQueue | None = None
    scheduler: Periodic | None = None
    events: Periodic | None = None
    started: bool = False

    def start(self) -> LocalApp:
        """Start the ingest queue worker and the maintenance timer; register drain hooks
        (queue drained first, then the timer stopped, then the container closed)."""
        if self.started:
            return self
        self.started = True
        if self.ingest_queue is not None:
            queue = self.ingest_queue
            queue.start()
            self.drain_hooks.append(lambda: _drain(queue))
        for timer in (self.scheduler, self.events):
            if timer is not None:
                self.drain_hooks.append(timer.stop)
                timer.start()
        if self.extraction_queue is not None:
            self.drain_hooks.append(self.extraction_queue.close)
        if self.container is not None:
            self.drain_hooks.append(self.container.close)
        return self


def _drain(queue: LocalQueue, timeout_s: float = 30.0) -> bool:
    ok = queue.drain(timeout_s)
    queue.close()  # what did not drain stays on disk for the next start
    return ok


def _queues(
    settings: Settings, *, durable: bool, ingest_max_receive_count: int
) -> tuple[LocalSqs, LocalQueue, LocalQueue]:
    """The local SQS with its ingest and extraction queues (on disk unless not ``durable``)."""
    sqs = LocalSqs()
    ingest_queue = LocalQueue(
        INGEST_QUEUE,
        region=settings.aws_region,
        max_receive_count=ingest_max_receive_count,
        path=queue_path(settings.data_dir, INGEST_QUEUE) if durable else None,
        max_message_bytes=settings.ingest_max_message_bytes,
    )
    extraction_queue = LocalQueue(
        EXTRACTION_QUEUE,
        region=settings.aws_region,
        path=queue_path(settings.data_dir, EXTRACTION_QUEUE) if durable else None,
    )
    sqs.add_queue(ingest_queue)
    sqs.add_queue(extraction_queue)
    return sqs, ingest_queue, extraction_queue


def _route_table(
    handlers: FunctionHandlers,
    parts: Mapping[str, Any] | None,
    probes: Mapping[str, Probe] | None,
) -> RouteTable:
    """Every API and MCP route to its function's handler; without ``parts``, the probe-only
    health handler fed by ``probes``."""
    routes: RouteTable = {r.route_key: handlers[r.function] for r in ROUTES}
    routes.update(dict.fromkeys(MCP_ROUTES, handlers[MCP_FUNCTION]))
    if parts is None:
        probes = probes or {}
        routes["GET /v1/health"] = make_health_handler(
            redis=probes.get("redis"), postgres=probes.get("postgres")
        )
    return routes


def _timers(
    settings: Settings,
    container: Container,
    *,
    handler: LambdaHandler | None,
    maintenance: Callable[[], object] | None,
    run_maintenance: bool,
    run_events: bool | None,
) -> tuple[Periodic | None, Periodic | None]:
    """The maintenance timer (the ``maintenance`` callable, else the maintenance function's
    ``handler``) and the event relay's timer (by default: when the maintenance function runs)."""
    job = maintenance
    if job is None and run_maintenance and handler is not None:
        job = maintenance_job(handler)
    scheduler = None
    if job is not None and run_maintenance:
        scheduler = Periodic(job, settings.maintenance_interval_s, name="maintenance")
    if run_events is None:
        run_events = run_maintenance and maintenance is None

    def publish() -> object:
        return container.events_relay.drain()  # the relay is built on the first run

    events = None
    if run_events:
        events = Periodic(publish, settings.events_poll_ms / 1000, name="events")
    return scheduler, events


def build_app(
    settings: Settings,
    *,
    handlers: FunctionHandlers,
    probes: Mapping[str, Probe] | None = None,
    parts: Mapping[str, Any] | None = None,
    maintenance: Callable[[], object] | None = None,
    run_maintenance: bool = True,
    run_events: bool | None = None,
    durable_queues: bool = True,
    ingest_max_receive_count: int = DEFAULT_MAX_RECEIVE_COUNT,
) -> LocalApp:
    """Every route wired to the Lambda ``handlers`` over one ``Container`` on the local queues.

    ``handlers`` are the functions' handlers by name (``REQUIRED_FUNCTIONS``, and
    ``maintenance`` for its timer; a missing one is a ``ValueError``); ``parts`` are
    ``Container`` keyword arguments (``database_url``, ``redis``, ``clock``...); with ``parts``
    given, ``GET /v1/health`` is the memories handler's (real probes), else the probe-only
    handler fed by ``probes``. ``run_events`` (default: when the maintenance
    function runs on its timer) starts the event relay's timer. Nothing connects until first
    use: the queue files (``<data_dir>/queues/*.sqlite3``; in memory with
    ``durable_queues=False``) open lazily, and so does the relay."""
    from engram.adapters.sqs import SqsSender

    _checked(handlers)
    sqs, ingest_queue, extraction_queue = _queues(
        settings, durable=durable_queues, ingest_max_receive_count=ingest_max_receive_count
    )
    container = Container(
        settings,
        sqs=sqs,
        ingest_queue=SqsSender(
            sqs, ingest_queue.url, max_batch_bytes=settings.ingest_max_message_bytes
        ),
        extraction_queue=SqsSender(sqs, extraction_queue.url),
        transcript_queue=receiver_for(extraction_queue),
        **dict(parts or {}),
    )
    set_container(container)
    routes = _route_table(handlers, parts, probes)
    ingest_queue.consumer = handlers["ingest_consumer"]
    scheduler, events = _timers(
        settings,
        container,
        handler=handlers.get(MAINTENANCE_FUNCTION),
        maintenance=maintenance,
        run_maintenance=run_maintenance,
        run_events=run_events,
    )
    return LocalApp(
        routes=routes,
        container=container,
        sqs=sqs,
        ingest_queue=ingest_queue,
        extraction_queue=extraction_queue,
        scheduler=scheduler,
        events=events,
    )


def build_routes(settings: Settings, handlers: FunctionHandlers) -> RouteTable:
    """The local service's route table (``{"METHOD /path/{param}": handler}``)."""
    return build_app(settings, handlers=handlers, run_maintenance=False).routes
