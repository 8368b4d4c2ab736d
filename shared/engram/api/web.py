"""What an HTTP endpoint (``engram.api.endpoints``) takes and gives back, free of any framework.

An endpoint is a plain function ``(request, *path_parameters) -> Reply``: the route table
(``engram.api.routes.ROUTES``) names it, and an adapter (``engram.adapters.apigateway``) calls
it with a ``Request`` over the current API Gateway v2 event and the process's parts, then
turns the ``Reply`` into its framework's response and emits the reply's metrics::

    def delete_memory(req: Request, memory_id: str) -> Reply:  # DELETE /v1/memories/{id}
        req.container.memories.delete(req.caller, path_param("id", memory_id))
        return Reply(204)

``EndpointParts`` names the parts of the composition root the endpoints use; the one
implementation is ``engram.bootstrap.Container``, which this package never imports.
"""

from __future__ import annotations

from collections.abc import Callable, Mapping
from dataclasses import dataclass, field
from functools import cache, cached_property
from typing import TYPE_CHECKING, Any, Protocol, TypeVar
from urllib.parse import unquote

from pydantic import BaseModel, TypeAdapter, ValidationError

from engram.api.http import parse_body
from engram.api.identity import caller_from_event, event_header
from engram.errors import InvalidInput

if TYPE_CHECKING:
    from engram.behaviour.service import BehaviourService
    from engram.identity import Caller
    from engram.insights.service import InsightsService
    from engram.memories.service import MemoryService
    from engram.settings import Settings
    from engram.use_cases.ingest import IngestService
    from engram.use_cases.me import MeService
    from engram.use_cases.session import SessionService

M = TypeVar("M", bound=BaseModel)


class EndpointParts(Protocol):
    """The parts of one process the endpoints call, each built on first use."""

    @property
    def settings(self) -> Settings: ...
    @property
    def behaviour(self) -> BehaviourService: ...
    @property
    def memories(self) -> MemoryService: ...
    @property
    def ingest(self) -> IngestService: ...
    @property
    def sessions(self) -> SessionService: ...
    @property
    def me(self) -> MeService: ...
    @property
    def insights(self) -> InsightsService: ...
    def ping_redis(self) -> bool: ...
    def ping_postgres(self) -> bool: ...


@dataclass
class Request:
    """One request's conveniences over its API Gateway v2 event (a plain mapping): the caller,
    settings, query, headers and parsed body, and the process's parts."""

    event: Mapping[str, Any]
    container: EndpointParts

    @property
    def settings(self) -> Settings:
        return self.container.settings

    @cached_property
    def caller(self) -> Caller:
        """The verified claims' caller (``engram.api.identity.caller_from_event``)."""
        return caller_from_event(self.event, self.settings)

    def query(self) -> dict[str, str]:
        params = self.event.get("queryStringParameters") or {}
        return {str(k): str(v) for k, v in params.items()} if isinstance(params, Mapping) else {}

    def header(self, name: str) -> str | None:
        return event_header(self.event, name)

    def body(self, model: type[M], *, empty_as_object: bool = False) -> M:
        """The JSON body as ``model`` (``engram.api.http.parse_body``: 413, 415, 400, 422)."""
        return parse_body(
            self.event,
            model,
            max_bytes=self.settings.max_body_bytes,
            empty_as_object=empty_as_object,
        )


@dataclass(frozen=True)
class Reply:
    """An endpoint's answer: the status, the JSON body (a model is dumped by alias, camelCase;
    ``None`` is an empty body, as for 204), extra headers, and the metrics to record for it
    (name -> count)."""

    status: int
    body: BaseModel | Mapping[str, Any] | list[Any] | None = None
    headers: Mapping[str, str] = field(default_factory=dict)
    metrics: Mapping[str, float] = field(default_factory=dict)


#: An endpoint: the request, then the route's path parameters positionally, in path order.
Endpoint = Callable[..., Reply]


def path_param(name: str, raw: str) -> str:
    """A path segment the router matched, percent-decoded as API Gateway decodes
    ``pathParameters`` (``a%20b`` -> ``a b``) and checked by the rule
    ``engram.api.models.PATH_PARAMETERS`` gives ``name``: ``InvalidInput`` naming it, before
    anything is read or queued."""
    value = unquote(raw)
    if not value:
        raise InvalidInput(name, "is required")
    try:
        checked: str = _path_rule(name).validate_python(value, strict=True)
    except ValidationError as exc:
        raise InvalidInput(name, exc.errors()[0]["msg"]) from None
    return checked


@cache
def _path_rule(name: str) -> TypeAdapter[str]:
    from engram.api.models import PATH_PARAMETERS

    return TypeAdapter(PATH_PARAMETERS[name])


__all__ = ["Endpoint", "EndpointParts", "Reply", "Request", "path_param"]
