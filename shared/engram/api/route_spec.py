"""One route of the v1 HTTP API as the route table (``engram.api.routes.ROUTES``) writes it.

Apart from the table so that what reads a route (the OpenAPI document, the adapters) needs
not import the table, whose endpoints may in turn read those.
"""

from __future__ import annotations

from typing import Literal

from pydantic import BaseModel, ConfigDict, Field

from engram.api.web import Endpoint

#: The Lambda functions that answer HTTP (``functions/<name>/handler.py``).
HttpFunction = Literal["ingest", "session", "memories"]
HTTP_FUNCTIONS: tuple[HttpFunction, ...] = ("ingest", "session", "memories")

#: API Gateway sends every other ``/v1`` path here, so unknown paths get the API's JSON 404.
CATCH_ALL = "/v1/{proxy+}"
CATCH_ALL_FUNCTION: HttpFunction = "memories"


class RouteSpec(BaseModel):
    model_config = ConfigDict(frozen=True)

    method: Literal["GET", "POST", "PUT", "PATCH", "DELETE"]
    path: str
    """API Gateway's form: ``{name}`` for a path parameter (its rule: ``PATH_PARAMETERS``)."""
    function: HttpFunction
    handler: Endpoint = Field(exclude=True)
    """The endpoint that answers the route (``engram.api.endpoints.<function>``): it takes the
    request, then the path parameters positionally, in path order."""
    summary: str
    request: type[BaseModel] | None = None
    query: type[BaseModel] | None = None
    response: type[BaseModel] | None = None
    status: int = 200
    auth: bool = True
    body_required: bool = True
    idempotency_key: bool = False
    """The route reads an ``Idempotency-Key`` header: the same key within 24 hours is the same
    request (stored once), another body under it is 422 ``idempotency_key_reused``."""
    if_match: bool = False
    """The route takes ``If-Match`` (a memory's ``ETag``): a version that no longer matches is
    412 ``precondition_failed`` and nothing changes."""
    etag: bool = False
    """The answer carries the memory's ``ETag`` (its ``version`` in quotes)."""

    @property
    def route_key(self) -> str:
        """``"METHOD /path/{param}"``, as API Gateway names a route."""
        return f"{self.method} {self.path}"

    @property
    def path_parameters(self) -> tuple[str, ...]:
        return tuple(s[1:-1] for s in self.path.split("/") if s.startswith("{") and s.endswith("}"))

    @property
    def resolver_rule(self) -> str:
        """The path in Powertools' form (``<param>``)."""
        return "/".join(
            f"<{s[1:-1]}>" if s.startswith("{") and s.endswith("}") else s
            for s in self.path.split("/")
        )
