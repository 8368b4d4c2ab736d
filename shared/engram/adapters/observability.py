"""Logging, tracing and metrics for every handler, in one place.

Powertools' ``Logger`` (JSON, correlation id from the API Gateway request id), ``Tracer``
(X-Ray; a no-op outside Lambda) and ``Metrics`` (CloudWatch EMF, namespace from
``POWERTOOLS_METRICS_NAMESPACE``, default ``Engram``) are created on first use, so importing
this module costs nothing and imports no Powertools.

A handler module does::

    from engram.adapters.observability import instrument

    @instrument
    def handler(event, context):
        ...

and for an SQS consumer ``@instrument(correlation_id_path=SQS_MESSAGE_ID)``.
"""

# Heavy or optional dependencies are imported where used, so importing this module is cheap.

from __future__ import annotations

import functools
import os
import threading
import warnings
from collections.abc import Callable
from typing import TYPE_CHECKING, Any, TypeVar, overload

if TYPE_CHECKING:
    from aws_lambda_powertools import Logger, Metrics, Tracer

DEFAULT_NAMESPACE = "Engram"
#: JMESPath of the correlation id in an API Gateway HTTP API (v2) event.
API_GATEWAY_REQUEST_ID = "requestContext.requestId"
#: JMESPath of the correlation id in an SQS event (the first record's message id).
SQS_MESSAGE_ID = "Records[0].messageId"

_lock = threading.RLock()
_objects: dict[str, Any] = {}

Handler = TypeVar("Handler", bound=Callable[..., Any])


def _service() -> str:
    from engram.settings import get_settings

    return os.environ.get("POWERTOOLS_SERVICE_NAME") or get_settings().service_name


def _get(name: str, factory: Callable[[], Any]) -> Any:
    obj = _objects.get(name)
    if obj is None:
        with _lock:
            obj = _objects.get(name)
            if obj is None:
                obj = factory()
                _objects[name] = obj
    return obj


def logger() -> Logger:
    """The process's JSON logger (level from ``Settings.log_level``)."""

    def make() -> Logger:
        from aws_lambda_powertools import Logger

        from engram.settings import get_settings

        return Logger(service=_service(), level=get_settings().log_level.upper())

    result: Logger = _get("logger", make)
    return result


def tracer() -> Tracer:
    def make() -> Tracer:
        from aws_lambda_powertools import Tracer

        return Tracer(service=_service())

    result: Tracer = _get("tracer", make)
    return result


def metrics() -> Metrics:
    def make() -> Metrics:
        from aws_lambda_powertools import Metrics

        # an invocation that records nothing is normal (health, reads): not worth a warning
        warnings.filterwarnings("ignore", message="No application metrics to publish")
        namespace = os.environ.get("POWERTOOLS_METRICS_NAMESPACE") or DEFAULT_NAMESPACE
        return Metrics(namespace=namespace, service=_service())

    result: Metrics = _get("metrics", make)
    return result


def add_metric(name: str, value: float = 1, unit: str = "Count") -> None:
    """Record one metric on the current invocation (flushed when the handler returns)."""
    from aws_lambda_powertools.metrics import MetricUnit

    metrics().add_metric(name=name, unit=MetricUnit(unit), value=value)


def _decorate(handler: Callable[..., Any], correlation_id_path: str) -> Callable[..., Any]:
    wrapped = logger().inject_lambda_context(
        handler, correlation_id_path=correlation_id_path, clear_state=True
    )
    wrapped = tracer().capture_lambda_handler(wrapped, capture_response=False)
    return metrics().log_metrics(wrapped, capture_cold_start_metric=True)


@overload
def instrument(handler: Handler, /) -> Handler: ...
@overload
def instrument(
    *, correlation_id_path: str = API_GATEWAY_REQUEST_ID
) -> Callable[[Handler], Handler]: ...
def instrument(
    handler: Callable[..., Any] | None = None,
    /,
    *,
    correlation_id_path: str = API_GATEWAY_REQUEST_ID,
) -> Any:
    """Wrap a Lambda handler with Logger context, Tracer and Metrics, built on first call."""

    def decorator(fn: Callable[..., Any]) -> Callable[..., Any]:
        built: list[Callable[..., Any]] = []

        @functools.wraps(fn)
        def wrapper(event: Any, context: Any) -> Any:
            if not built:
                with _lock:
                    if not built:
                        built.append(_decorate(fn, correlation_id_path))
            return built[0](event, context)

        return wrapper

    if handler is not None:
        return decorator(handler)
    return decorator
