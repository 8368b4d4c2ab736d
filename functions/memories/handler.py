"""The memories function: every /v1 route but ingest and sessions, and ``GET /v1/health``.

Facts (Redis), memories, tools, review, personas, team settings, team insights (PostgreSQL),
export and erasure (both). A write PostgreSQL cannot accept answers 503; anything the caller
may not see answers 404. The endpoints: ``engram.api.endpoints.memories`` (the table:
``engram.api.routes.ROUTES``).
"""

from __future__ import annotations

from typing import Any

from engram.adapters.apigateway import http_app
from engram.adapters.observability import instrument
from engram.bootstrap import get_container

app = http_app("memories", get_container)


@instrument
def handler(event: dict[str, Any], context: Any) -> dict[str, Any]:
    return app.resolve(event, context)
