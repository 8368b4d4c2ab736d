"""The session function's endpoint: ``POST /v1/sessions`` — consolidation and recall, one
prompt.

Always 200 when the caller and body are valid: a store that is down or slow shows up in
``degraded`` (``behaviour:*`` / ``memories:*``), never as an error.
"""

from __future__ import annotations

from engram.api.models import SessionRequest
from engram.api.presenters import session_response
from engram.api.web import Reply, Request


def post_session(req: Request) -> Reply:
    caller = req.caller
    body = req.body(SessionRequest, empty_as_object=True)
    context = req.container.sessions.start(caller, persona_id=body.persona_id, query=body.query)
    metrics: dict[str, float] = {}
    if context.behaviour_degraded:
        metrics["ConsolidationDegraded"] = 1
    if context.memories_degraded:
        metrics["RecallDegraded"] = 1
    return Reply(200, session_response(context), metrics=metrics)
