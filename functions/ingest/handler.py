"""The ingest function: ``POST /v1/observations``, ``POST /v1/events`` and
``POST /v1/conversations/{conversationId}/transcript``.

202 only after SQS accepted every record; 503 (``unavailable``) otherwise. The endpoints:
``engram.api.endpoints.ingest`` (the table: ``engram.api.routes.ROUTES``).
"""

from __future__ import annotations

from typing import Any

from engram.adapters.apigateway import http_app
from engram.adapters.observability import instrument
from engram.bootstrap import get_container

app = http_app("ingest", get_container)


@instrument
def handler(event: dict[str, Any], context: Any) -> dict[str, Any]:
    return app.resolve(event, context)
