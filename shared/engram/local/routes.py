"""What ``engram serve`` runs: the route table and the background pieces around it.

Phase 1 wires only ``GET /v1/health``; the function handlers (ingest, session, memories) are
added here when they exist, keyed by the same route keys API Gateway uses (see
``engram.api.models.ROUTES``).
"""

from __future__ import annotations

import json
import logging
from collections.abc import Callable, Mapping
from dataclasses import dataclass, field
from importlib.metadata import PackageNotFoundError, version
from typing import Any

from engram.api.models import DependencyStatus, HealthResponse
from engram.local.server import LambdaHandler, RouteTable
from engram.settings import Settings

_log = logging.getLogger("engram.local.routes")

#: A dependency probe: returns normally when the dependency answers, raises otherwise.
Probe = Callable[[], object]


def _version() -> str:
    try:
        return version("engram")
    except PackageNotFoundError:
        return "0+unknown"


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
            version=_version(),
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


@dataclass
class LocalApp:
    """The route table plus hooks ``engram serve`` runs on shutdown (SQS drain, timers...)."""

    routes: RouteTable
    drain_hooks: list[Callable[[], object]] = field(default_factory=list)


def build_app(settings: Settings, *, probes: Mapping[str, Probe] | None = None) -> LocalApp:
    probes = probes or {}
    routes: RouteTable = {
        "GET /v1/health": make_health_handler(
            redis=probes.get("redis"), postgres=probes.get("postgres")
        ),
    }
    return LocalApp(routes=routes)


def build_routes(settings: Settings) -> RouteTable:
    """The local service's route table (``{"METHOD /path/{param}": handler}``)."""
    return build_app(settings).routes
