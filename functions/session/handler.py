"""The session function: ``POST /v1/sessions`` — consolidation and recall, one prompt.

Always 200 when the caller and body are valid: a store that is down or slow shows up in
``degraded``, never as an error. The endpoint: ``engram.api.endpoints.session`` (the table:
``engram.api.routes.ROUTES``).
"""

from __future__ import annotations

from typing import Any

from engram.adapters.apigateway import http_app
from engram.adapters.observability import instrument
from engram.bootstrap import get_container

app = http_app("session", get_container)


@instrument
def handler(event: dict[str, Any], context: Any) -> dict[str, Any]:
    return app.resolve(event, context)
