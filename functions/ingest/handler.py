"""The ingest function: ``POST /v1/observations``, ``POST /v1/events`` and
``POST /v1/conversations/{conversationId}/transcript``.

202 only after SQS accepted every record; 503 (``unavailable``) otherwise. Ids are
deterministic per request (``Idempotency-Key`` header or the body), so a retry is idempotent.
"""

from __future__ import annotations

from typing import Any

from engram.api.http import json_response
from engram.api.models import (
    AcceptedResponse,
    EventsRequest,
    ObservationsRequest,
    QueuedResponse,
    TranscriptRequest,
)
from engram.observability import add_metric, instrument
from engram.use_cases.routing import Request, Route, dispatch

IDEMPOTENCY_HEADER = "idempotency-key"


def post_observations(req: Request) -> dict[str, Any]:
    caller = req.caller
    body = req.body(ObservationsRequest)
    accepted = req.container.ingest.accept_observations(
        caller, body, idempotency_key=req.header(IDEMPOTENCY_HEADER)
    )
    add_metric("ObservationsAccepted", accepted.accepted)
    return json_response(202, AcceptedResponse(accepted=accepted.accepted, ids=accepted.ids))


def post_events(req: Request) -> dict[str, Any]:
    caller = req.caller
    body = req.body(EventsRequest)
    accepted = req.container.ingest.accept_events(
        caller, body, idempotency_key=req.header(IDEMPOTENCY_HEADER)
    )
    add_metric("ObservationsAccepted", accepted.accepted)
    return json_response(202, AcceptedResponse(accepted=accepted.accepted, ids=accepted.ids))


def post_transcript(req: Request) -> dict[str, Any]:
    caller = req.caller
    conversation_id = req.path("conversationId")
    body = req.body(TranscriptRequest)
    job = req.container.ingest.queue_transcript(caller, conversation_id, body)
    add_metric("TranscriptsQueued")
    return json_response(
        202,
        QueuedResponse(
            queued=True, conversation_id=job.conversation_id, messages=len(job.messages)
        ),
    )


ROUTES: dict[str, Route] = {
    "POST /v1/observations": post_observations,
    "POST /v1/events": post_events,
    "POST /v1/conversations/{conversationId}/transcript": post_transcript,
}


@instrument
def handler(event: dict[str, Any], context: Any) -> dict[str, Any]:
    return dispatch(event, ROUTES)
