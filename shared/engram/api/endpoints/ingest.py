"""The ingest function's endpoints: ``POST /v1/observations``, ``POST /v1/events`` and
``POST /v1/conversations/{conversationId}/transcript``.

202 only after SQS accepted every record; 503 (``unavailable``) otherwise. Ids are
deterministic per request, so a retry is stored once while a repeat is new: the same
``Idempotency-Key`` within 24 hours, or without one the same body within
``ENGRAM_INGEST_RETRY_WINDOW_S`` (the rule: ``engram.use_cases.ingest``). The same key with
another body is 422 ``idempotency_key_reused``.
A transcript naming a persona is refused (403) when a memory save with that persona would be.
"""

from __future__ import annotations

from engram.api.models import (
    IDEMPOTENCY_HEADER,
    AcceptedResponse,
    EventsRequest,
    ObservationsRequest,
    QueuedResponse,
    TranscriptRequest,
)
from engram.api.web import Reply, Request, path_param
from engram.use_cases.ingest import Accepted


def post_observations(req: Request) -> Reply:
    caller = req.caller
    command = req.body(ObservationsRequest).command()
    key = req.header(IDEMPOTENCY_HEADER)
    return _accepted(req.container.ingest.accept_observations(caller, command, idempotency_key=key))


def post_events(req: Request) -> Reply:
    caller = req.caller
    command = req.body(EventsRequest).command()
    key = req.header(IDEMPOTENCY_HEADER)
    return _accepted(req.container.ingest.accept_events(caller, command, idempotency_key=key))


def _accepted(accepted: Accepted) -> Reply:
    """202 with the observations queued, counted in ``ObservationsAccepted``."""
    return Reply(
        202,
        AcceptedResponse(accepted=accepted.accepted, ids=accepted.ids),
        metrics={"ObservationsAccepted": accepted.accepted},
    )


def post_transcript(req: Request, conversation_id: str) -> Reply:
    caller = req.caller
    conversation = path_param("conversationId", conversation_id)  # checked before anything
    command = req.body(TranscriptRequest).command(conversation)
    job = req.container.ingest.queue_transcript(caller, command)
    return Reply(
        202,
        QueuedResponse(
            queued=True, conversation_id=job.conversation_id, messages=len(job.messages)
        ),
        metrics={"TranscriptsQueued": 1},
    )
