"""How a Lambda handler answers an API Gateway HTTP API (payload v2) event.

Each HTTP function is a Powertools ``APIGatewayHttpResolver`` whose routes come from the one
route table (``engram.api.routes.ROUTES``: path, method and the endpoint that answers). A
handler module of ``functions/`` builds it over the container provider it is given (the
process's ``get_container``)::

    app = http_app("memories", get_container)  # every route of the table's "memories" function

    @instrument
    def handler(event, context):
        return app.resolve(event, context)

An endpoint (``engram.api.endpoints``) is framework-free: ``http_app`` calls it with an
``engram.api.web.Request`` over the current event and ``container()`` (asked per request, so
nothing is built at import and a test may swap the process's container), plus the path
parameters in path order, and turns its ``Reply`` into a Powertools ``Response``
(``answer``), recording the reply's metrics (``add_metric``). This module never builds a
container: the handler module gives the provider.

Errors are mapped to the one error body in one place (``register_error_handlers``: every exception
an endpoint raises, and the resolver's own 404 for a path no route matches). Bodies are parsed
with ``engram.api.http.parse_body`` (size, content type, JSON, field names), not by the
resolver's validation, so error shapes are ours.

Lambda runs one invocation per execution environment at a time, which is what the resolver
assumes: it keeps the current event and its routing context on the resolver (the event even on
the shared ``BaseRouter`` class). ``engram serve`` calls the same handler modules from many
threads at once, so the resolver ``resolver()`` builds keeps that per-request state per thread
and builds each route's middleware stack once under a lock; otherwise it is the stock resolver.

Powertools is imported inside the functions below, so importing
this module stays cheap; the handler modules that call ``http_app(function, container)`` load
it at import.
"""

from __future__ import annotations

import json
import threading
from collections.abc import Callable, Mapping
from typing import TYPE_CHECKING, Any, Generic, TypeVar, cast

from pydantic import ValidationError

from engram import errors as domain
from engram.adapters.observability import add_metric
from engram.api.errors import (
    JSON_CONTENT_TYPE,
    BodyTooLargeError,
    InvalidJsonError,
    UnsupportedMediaTypeError,
    error_response,
    log_unexpected,
)
from engram.api.http import json_response
from engram.api.web import Reply, Request

if TYPE_CHECKING:
    from aws_lambda_powertools.event_handler import APIGatewayHttpResolver, Response
    from aws_lambda_powertools.utilities.data_classes import APIGatewayProxyEventV2
    from aws_lambda_powertools.utilities.typing import LambdaContext

    from engram.api.routes import HttpFunction, RouteSpec
    from engram.api.web import EndpointParts

_T = TypeVar("_T")

_resolver_class: type[APIGatewayHttpResolver] | None = None
_resolver_class_lock = threading.Lock()


def answer(reply: Reply) -> Response[str]:
    """``reply`` as a Powertools ``Response`` (``engram.api.http.json_response``'s status,
    headers and body: a model dumped by alias, camelCase, in JSON mode; an empty body for
    ``None``, as for 204), its metrics recorded on the current invocation."""
    from aws_lambda_powertools.event_handler import Response

    for name, value in reply.metrics.items():
        add_metric(name, value)
    built = json_response(reply.status, reply.body, headers=reply.headers)
    # "" rather than None: the resolver would serialise a None JSON body as "null"
    return Response(status_code=reply.status, body=built.get("body", ""), headers=built["headers"])


def resolver() -> APIGatewayHttpResolver:
    """A new ``APIGatewayHttpResolver`` (no resolver-side validation) whose errors are the
    one error body and whose per-request state is per thread."""
    app = _thread_safe_resolver_class()()
    register_error_handlers(app)
    return app


def http_app(
    function: HttpFunction, container: Callable[[], EndpointParts]
) -> APIGatewayHttpResolver:
    """The resolver of ``function``: a ``resolver()`` with every route of the table's
    ``function`` bound to its endpoint over ``container()`` (``bind_routes``)."""
    app = resolver()
    bind_routes(app, function, container)
    return app


def bind_routes(
    app: APIGatewayHttpResolver, function: HttpFunction, container: Callable[[], EndpointParts]
) -> None:
    """Register on ``app`` every route ``engram.api.routes.ROUTES`` gives ``function``, each
    calling the endpoint the table names with a ``Request`` over the current event and
    ``container()`` (asked per request), then the path parameters in path order."""
    from engram.api.routes import routes_of

    for route in routes_of(function):
        app.route(route.resolver_rule, route.method)(_bound(app, route, container))


def _bound(
    app: APIGatewayHttpResolver, route: RouteSpec, container: Callable[[], EndpointParts]
) -> Callable[..., Response[str]]:
    endpoint, names = route.handler, route.path_parameters

    def call(**params: str) -> Response[str]:
        req = Request(app.current_event.raw_event, container())
        return answer(endpoint(req, *(params[name] for name in names)))

    call.__name__ = call.__qualname__ = getattr(endpoint, "__name__", "endpoint")
    call.__doc__ = endpoint.__doc__
    return call


def _thread_safe_resolver_class() -> type[APIGatewayHttpResolver]:
    global _resolver_class  # noqa: PLW0603 - built once, on first use (Powertools is lazy)
    with _resolver_class_lock:
        if _resolver_class is None:
            _resolver_class = _build_resolver_class()
        return _resolver_class


class _OfThread(Generic[_T]):
    """An attribute of the resolver that every calling thread has its own value of (``name``
    on the resolver's ``_per_thread``)."""

    def __init__(self, name: str) -> None:
        self._name = name

    def __get__(self, resolver: _PerThreadState, owner: type | None = None) -> _T:
        value: _T = getattr(resolver._per_thread, self._name)
        return value

    def __set__(self, resolver: _PerThreadState, value: _T) -> None:
        setattr(resolver._per_thread, self._name, value)


class _PerThreadState:
    """The request state of a Powertools resolver — ``current_event``, ``lambda_context`` and
    ``context`` (route, route arguments) — held per calling thread, so one resolver serves
    concurrent requests (``engram serve`` calls a handler from many threads)."""

    current_event: _OfThread[APIGatewayProxyEventV2] = _OfThread("event")
    lambda_context: _OfThread[LambdaContext] = _OfThread("lambda_context")

    def __init__(self, **kwargs: Any) -> None:
        self._per_thread = threading.local()
        self._build_lock = threading.Lock()
        super().__init__(**kwargs)

    @property
    def context(self) -> dict[str, Any]:
        found: dict[str, Any] | None = getattr(self._per_thread, "context", None)
        if found is None:
            found = self._per_thread.context = {}
        return found

    @context.setter
    def context(self, value: dict[str, Any]) -> None:
        self._per_thread.context = value


def _build_resolver_class() -> type[APIGatewayHttpResolver]:
    from aws_lambda_powertools.event_handler import APIGatewayHttpResolver
    from aws_lambda_powertools.event_handler.api_gateway import ResponseBuilder, Route
    from aws_lambda_powertools.utilities.data_classes import APIGatewayProxyEventV2

    # the per-thread properties stand in for the base's plain ``current_event`` attribute
    class ThreadSafeHttpResolver(_PerThreadState, APIGatewayHttpResolver):  # type: ignore[misc]
        """``APIGatewayHttpResolver`` whose request state belongs to the calling thread."""

        def resolve(self, event: Mapping[str, Any], context: LambdaContext) -> dict[str, Any]:
            # the stock resolve() sets the event on the BaseRouter class; reads go to ours
            self.current_event = cast(APIGatewayProxyEventV2, self._to_proxy_event(dict(event)))
            self.lambda_context = context
            try:
                return super().resolve(event, context)
            finally:
                del self._per_thread.event, self._per_thread.lambda_context

        def _call_route(
            self, route: Route, route_arguments: dict[str, str]
        ) -> ResponseBuilder[Any]:
            # a route builds its middleware stack on its first call: one thread builds it
            if not route._middleware_stack_built:
                with self._build_lock:
                    if not route._middleware_stack_built:
                        route._build_middleware_stack(
                            router_middlewares=self._router_middlewares, app=self
                        )
            return super()._call_route(route, route_arguments)

    return ThreadSafeHttpResolver


# --- errors: the one place they become HTTP (the mapping itself is engram.api.errors) ---------
def to_powertools_response(exc: BaseException) -> Response[str]:
    from aws_lambda_powertools.event_handler import Response

    err = error_response(exc)
    if err.status >= 500:
        log_unexpected(exc)
    return Response(
        status_code=err.status,
        content_type=JSON_CONTENT_TYPE,
        body=err.body_json(),
        headers=dict(err.headers),
    )


def register_error_handlers(app: APIGatewayHttpResolver) -> None:
    """Make ``app`` answer every error with the one error body (``engram.api.errors``).
    Call once per function."""
    from aws_lambda_powertools.event_handler.exceptions import NotFoundError, ServiceError
    from aws_lambda_powertools.event_handler.openapi.exceptions import (
        RequestUnsupportedContentType,
        RequestValidationError,
    )

    handled: list[type[Exception]] = [
        domain.EngramError,
        ValidationError,
        RequestValidationError,
        RequestUnsupportedContentType,
        json.JSONDecodeError,
        UnicodeDecodeError,
        InvalidJsonError,
        BodyTooLargeError,
        UnsupportedMediaTypeError,
        NotFoundError,
        ServiceError,
        Exception,
    ]
    app.exception_handler(handled)(to_powertools_response)
