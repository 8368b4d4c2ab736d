"""How a Lambda handler answers an API Gateway HTTP API (payload v2) event.

``dispatch(event, routes)`` picks the function for ``event["routeKey"]`` (``"GET
/v1/memories/{id}"``, exactly as API Gateway and the local server set it), calls it with a
``Request`` and turns any exception into the SPEC §4 error body (``engram.api.errors``): the one
place errors become HTTP. A route function parses its input, calls one use case and returns
``json_response(...)``.
"""

from __future__ import annotations

from collections.abc import Callable, Mapping
from dataclasses import dataclass
from functools import cached_property
from typing import TYPE_CHECKING, Any, TypeVar

from pydantic import BaseModel

from engram.api.errors import to_lambda_response
from engram.api.http import parse_body
from engram.errors import InvalidInput, NotFound
from engram.identity import Caller
from engram.settings import Settings

if TYPE_CHECKING:
    from engram.bootstrap import Container

M = TypeVar("M", bound=BaseModel)
Route = Callable[["Request"], dict[str, Any]]


@dataclass
class Request:
    event: Mapping[str, Any]
    container: Container

    @property
    def settings(self) -> Settings:
        return self.container.settings

    @cached_property
    def caller(self) -> Caller:
        from engram.api.identity import caller_from_event

        return caller_from_event(self.event, self.settings)

    def path(self, name: str) -> str:
        params = self.event.get("pathParameters") or {}
        value = params.get(name) if isinstance(params, Mapping) else None
        if not isinstance(value, str) or not value:
            raise InvalidInput(name, "is required")
        return value

    def query(self) -> dict[str, str]:
        params = self.event.get("queryStringParameters") or {}
        return {str(k): str(v) for k, v in params.items()} if isinstance(params, Mapping) else {}

    def header(self, name: str) -> str | None:
        headers = self.event.get("headers") or {}
        if not isinstance(headers, Mapping):
            return None
        wanted = name.lower()
        for key, value in headers.items():
            if str(key).lower() == wanted:
                return str(value)
        return None

    def body(self, model: type[M], *, empty_as_object: bool = False) -> M:
        return parse_body(
            self.event,
            model,
            max_bytes=self.settings.max_body_bytes,
            empty_as_object=empty_as_object,
        )


def dispatch(
    event: Mapping[str, Any], routes: Mapping[str, Route], container: Container | None = None
) -> dict[str, Any]:
    """Answer ``event`` with the route its ``routeKey`` names (404 when none)."""
    try:
        if container is None:
            from engram.bootstrap import get_container

            container = get_container()
        route = routes.get(str(event.get("routeKey", "")))
        if route is None:
            raise NotFound("not found")
        return route(Request(event, container))
    except Exception as exc:
        return to_lambda_response(exc)
