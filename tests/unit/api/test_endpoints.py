"""The endpoints are plain functions of a request: no resolver, no Lambda, no Powertools. Each
gives its status, body, headers and the metrics to record, and checks its path parameters by
their rule before anything is read or queued."""

from __future__ import annotations

import json
from types import SimpleNamespace
from typing import Any

import pytest
from tests.support.unreachable import CLAIMS, UNREACHABLE
from tests.unit.functions.test_use_cases import Queue

from engram.adapters.idempotency_keys import InMemoryIdempotencyKeys
from engram.api.endpoints import ingest, session
from engram.api.models import AcceptedResponse
from engram.api.web import Request
from engram.clock import FakeClock
from engram.errors import InvalidInput
from engram.identity import Caller
from engram.local.gateway import build_event
from engram.use_cases.ingest import IngestService
from engram.use_cases.session import SessionContext


def request(container: Any, body: bytes = b"", **headers: str) -> Request:
    event = build_event(
        method="POST",
        raw_path="/v1/x",
        raw_query="",
        headers=list(headers.items()),
        body=body,
        route_key="POST /v1/x",
        path_parameters={},
        source_ip="127.0.0.1",
        claims=CLAIMS,
    )
    return Request(event, container)


def ingest_parts(queue: Queue) -> SimpleNamespace:
    service = IngestService(
        queue,
        clock=FakeClock(),
        keys=InMemoryIdempotencyKeys(),
        observation_retention_days=30,
        retry_window_s=600,
    )
    return SimpleNamespace(settings=UNREACHABLE, ingest=service)


def test_accepted_events_are_202_with_their_count_as_a_metric() -> None:
    queue = Queue()
    events = [{"kind": "query", "text": "royalties?"}, {"kind": "query", "text": "contracts?"}]
    body = json.dumps({"events": events}).encode()
    reply = ingest.post_events(request(ingest_parts(queue), body))
    assert reply.status == 202
    assert isinstance(reply.body, AcceptedResponse)
    assert (reply.body.accepted, len(reply.body.ids)) == (2, 2)
    assert reply.metrics == {"ObservationsAccepted": 2}
    assert all(i in "".join(queue.bodies) for i in reply.body.ids)  # queued


def test_a_transcripts_conversation_id_is_checked_before_anything_is_queued() -> None:
    queue = Queue()
    body = b'{"messages": [{"role": "user", "content": "hi"}]}'
    with pytest.raises(InvalidInput) as err:
        ingest.post_transcript(request(ingest_parts(queue), body), "a%01b")
    assert err.value.field == "conversationId"
    assert queue.bodies == []


class Sessions:
    def __init__(self, degraded: list[str]) -> None:
        self.degraded = degraded

    def start(self, caller: Caller, *, persona_id: str | None, query: str | None) -> Any:
        return SessionContext(caller.identity_id, persona_id, degraded=self.degraded)


@pytest.mark.parametrize(
    ("degraded", "metrics"),
    [
        ([], {}),
        (["behaviour:timeout"], {"ConsolidationDegraded": 1}),
        (["memories:down"], {"RecallDegraded": 1}),
    ],
)
def test_a_degraded_session_is_200_and_counted(degraded: list[str], metrics: Any) -> None:
    parts = SimpleNamespace(settings=UNREACHABLE, sessions=Sessions(degraded))
    reply = session.post_session(request(parts))
    assert (reply.status, reply.metrics) == (200, metrics)
