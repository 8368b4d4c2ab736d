"""The session function: ``POST /v1/sessions`` — consolidation and recall, one prompt.

Always 200 when the caller and body are valid: a store that is down or slow shows up in
``degraded`` (``behaviour:*`` / ``memories:*``), never as an error.
"""

from __future__ import annotations

from typing import Any

from aws_lambda_powertools.event_handler import Response

from engram.adapters.apigateway import bind_routes, http_app, request, respond
from engram.adapters.observability import add_metric, instrument
from engram.api.models import SessionRequest
from engram.api.presenters import session_response

app = http_app()


def post_session() -> Response[str]:
    req = request(app)
    caller = req.caller
    body = req.body(SessionRequest, empty_as_object=True)
    context = req.container.sessions.start(caller, persona_id=body.persona_id, query=body.query)
    if context.behaviour_degraded:
        add_metric("ConsolidationDegraded")
    if context.memories_degraded:
        add_metric("RecallDegraded")
    return respond(200, session_response(context))


bind_routes(app, "session", globals())  # the paths: engram.api.routes.ROUTES


@instrument
def handler(event: dict[str, Any], context: Any) -> dict[str, Any]:
    return app.resolve(event, context)
