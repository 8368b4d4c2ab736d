"""Fixtures of the event tests: moto's EventBridge behind an HTTP server on a loopback port, the
project's fault proxy in front of it, a bus whose rule sends every Engram event to an
SQS queue (what a consumer receives), and a ``Container`` over a migrated embedded PostgreSQL
and a real redis-server, on a fake clock, publishing through the proxy."""

from __future__ import annotations

import json
import threading
import uuid
from collections.abc import Iterator
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import psycopg
import pytest
from tests.support.aws import CREDENTIALS, REGION
from tests.support.callers import team_caller
from tests.support.faultproxy import FaultProxy
from tests.support.services import RedisTarget

from engram.adapters.eventbridge import EventBridgeBus
from engram.adapters.postgres.pool import Database
from engram.bootstrap import Container
from engram.clock import FakeClock
from engram.events.models import SOURCE
from engram.events.relay import OutboxRelay
from engram.settings import Settings

DIMS = 64


@pytest.fixture(autouse=True)
def _quiet_powertools(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("POWERTOOLS_TRACE_DISABLED", "true")
    monkeypatch.setenv("POWERTOOLS_METRICS_DISABLED", "true")


class MotoEventsEndpoint:
    """moto's EventBridge behind a real HTTP server on a loopback port (werkzeug), so that the
    project's TCP fault proxy can stand between the relay's client and it. Each request's
    operation (``X-Amz-Target``) and JSON parameters are handed to a moto-backed client in
    this process; its answer (or error) goes back as EventBridge's JSON. Requests to loopback
    addresses pass through moto's interception (its ``passthrough`` setting), so only the
    server's own client is answered by moto directly."""

    def __init__(self, events: Any) -> None:
        from werkzeug.serving import make_server

        self._events = events
        self._server = make_server("127.0.0.1", 0, self._app, threaded=True)
        self._thread = threading.Thread(target=self._server.serve_forever, daemon=True)

    @property
    def address(self) -> tuple[str, int]:
        host, port = self._server.server_address[:2]
        return str(host), int(port)

    def _app(self, environ: dict[str, Any], start_response: Any) -> list[bytes]:
        from botocore.exceptions import ClientError
        from werkzeug.wrappers import Request

        request = Request(environ)
        operation = request.headers.get("X-Amz-Target", "").rpartition(".")[2]
        params = json.loads(request.get_data() or b"{}")
        try:
            result = dict(self._events._make_api_call(operation, params))
            result.pop("ResponseMetadata", None)
            status, body = "200 OK", json.dumps(result, default=str)
        except ClientError as exc:
            code = exc.response["ResponseMetadata"]["HTTPStatusCode"]
            error = exc.response["Error"]
            status = f"{code} Error"
            body = json.dumps({"__type": error["Code"], "message": error.get("Message", "")})
        start_response(status, [("Content-Type", "application/x-amz-json-1.1")])
        return [body.encode()]

    def __enter__(self) -> MotoEventsEndpoint:
        self._thread.start()
        return self

    def __exit__(self, *exc: object) -> None:
        self._server.shutdown()
        self._thread.join(5)


@pytest.fixture
def moto_aws() -> Iterator[None]:
    """moto for the test; requests to loopback addresses go to the real network (the proxy)."""
    from moto import mock_aws

    loopback = {"urls": [r"^https?://127\.0\.0\.1(:\d+)?(/.*)?$"], "services": []}
    with mock_aws(config={"core": {"passthrough": loopback}}):
        yield


def boto3_client(service: str) -> Any:
    """A client moto answers in this process (its default AWS endpoint)."""
    import boto3

    return boto3.session.Session(region_name=REGION, **CREDENTIALS).client(service)


def _client(service: str, endpoint: str, **config: Any) -> Any:
    import boto3
    from botocore.config import Config

    return boto3.session.Session(region_name=REGION, **CREDENTIALS).client(
        service, endpoint_url=endpoint, config=Config(**config)
    )


class Refusals:
    """Makes EventBridge itself refuse chosen entries: before a ``PutEvents`` request is built,
    the ``Detail`` of an entry whose event id is listed is replaced by text that is not JSON,
    so EventBridge answers HTTP 200 with ``FailedEntryCount`` and ``MalformedDetail`` for it.
    ``times[event_id]``: how many more puts to refuse (-1: every one)."""

    def __init__(self) -> None:
        self.times: dict[str, int] = {}
        self.requests: list[list[str]] = []
        self.failed_entry_counts: list[int] = []

    def answered(self, parsed: dict[str, Any], **_: Any) -> None:
        if "FailedEntryCount" in parsed:
            self.failed_entry_counts.append(int(parsed["FailedEntryCount"]))

    def __call__(self, params: dict[str, Any], **_: Any) -> None:
        ids = []
        for entry in params.get("Entries", []):
            event_id = json.loads(entry["Detail"])["eventId"]
            ids.append(event_id)
            left = self.times.get(event_id, 0)
            if left:
                self.times[event_id] = left - 1 if left > 0 else -1
                entry["Detail"] = "refused by the test"
        self.requests.append(ids)


@dataclass
class EventBridge:
    proxy: FaultProxy
    events: Any  # through the proxy
    sqs: Any  # straight to moto
    bus_name: str
    queue_url: str
    refusals: Refusals
    received: list[dict[str, Any]] = field(default_factory=list)

    def bus(self) -> EventBridgeBus:
        return EventBridgeBus(self.events, self.bus_name)

    def delivered(self) -> list[dict[str, Any]]:
        """Every event the bus's rule delivered so far (EventBridge's envelope)."""
        while True:
            got = self.sqs.receive_message(
                QueueUrl=self.queue_url, MaxNumberOfMessages=10, WaitTimeSeconds=0
            ).get("Messages", [])
            if not got:
                return self.received
            for message in got:
                self.received.append(json.loads(message["Body"]))
                self.sqs.delete_message(
                    QueueUrl=self.queue_url, ReceiptHandle=message["ReceiptHandle"]
                )

    def details(self) -> list[dict[str, Any]]:
        return [e["detail"] for e in self.delivered()]


@pytest.fixture
def eventbridge(moto_aws: None) -> Iterator[EventBridge]:
    admin = boto3_client("events")
    sqs = boto3_client("sqs")
    with (
        MotoEventsEndpoint(boto3_client("events")) as endpoint,
        FaultProxy(endpoint.address) as proxy,
    ):
        # one attempt per call: the relay's own retries are what the tests observe. A put that
        # outlived its read timeout on a loaded machine counted as a failure although moto had
        # the events (the proxy refuses at once when down, so a long timeout costs nothing)
        events = _client(
            "events",
            f"http://127.0.0.1:{proxy.port}",
            retries={"total_max_attempts": 1},
            connect_timeout=5,
            read_timeout=30,
        )
        name = f"engram-test-{uuid.uuid4().hex[:8]}"
        admin.create_event_bus(Name=name)
        queue_url = sqs.create_queue(QueueName=name)["QueueUrl"]
        queue_arn = sqs.get_queue_attributes(QueueUrl=queue_url, AttributeNames=["QueueArn"])[
            "Attributes"
        ]["QueueArn"]
        admin.put_rule(
            Name="all-engram-events",
            EventBusName=name,
            EventPattern=json.dumps({"source": [SOURCE]}),
        )
        admin.put_targets(
            Rule="all-engram-events",
            EventBusName=name,
            Targets=[{"Id": "consumer", "Arn": queue_arn}],
        )
        refusals = Refusals()
        events.meta.events.register("before-parameter-build.events.PutEvents", refusals)
        events.meta.events.register("after-call.events.PutEvents", refusals.answered)
        yield EventBridge(proxy, events, sqs, name, queue_url, refusals)


@dataclass
class World:
    container: Container
    clock: FakeClock
    bridge: EventBridge
    url: str

    caller = staticmethod(team_caller)

    def relay(self, **kwargs: Any) -> OutboxRelay:
        s = self.container.settings
        options: dict[str, Any] = {
            "clock": self.clock,
            "max_attempts": s.events_max_attempts,
            "lease_ms": s.events_lease_s * 1000,
            **kwargs,
        }
        bus = options.pop("bus", self.bridge.bus())
        return OutboxRelay(self.container.outbox, bus, **options)

    def sql(self, query: str, *params: Any) -> list[tuple[Any, ...]]:
        """As the database owner (no RLS): what is really stored."""
        with psycopg.connect(self.url, autocommit=True) as conn:
            cur = conn.execute(query, params)
            return list(cur.fetchall()) if cur.description else []

    def outbox(self) -> list[tuple[str, str, int, str]]:
        """(aggregate, type, sequence, state) of every outbox row, in write order."""
        return [
            (str(a), str(t), int(s), str(st))
            for a, t, s, st in self.sql(
                "SELECT aggregate_id, event_type, sequence, state FROM event_outbox"
                " ORDER BY position"
            )
        ]


@pytest.fixture
def world(
    standalone_redis: RedisTarget, db: Database, eventbridge: EventBridge, tmp_path: Path
) -> Iterator[World]:
    clock = FakeClock()
    settings = Settings(
        **standalone_redis.settings(),
        database_url=db.conninfo,
        data_dir=tmp_path,
        embedding_dimensions=DIMS,
        event_bus_name=eventbridge.bus_name,
        events_max_attempts=4,
    )
    container = Container(
        settings,
        clock=clock,
        database=db,
        database_url=db.conninfo,
        migrate=False,
        event_bus=eventbridge.bus(),
        ingest_queue=None,
        extraction_queue=None,
    )
    try:
        yield World(container, clock, eventbridge, db.conninfo)
    finally:
        container.close()
