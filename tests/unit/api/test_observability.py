"""Handlers instrumented once: JSON logs with the request id, EMF metrics, lazy creation."""

from __future__ import annotations

import json
import subprocess
import sys
from typing import Any

import pytest

from engram.adapters import observability


@pytest.fixture(autouse=True)
def fresh(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(observability, "_objects", {})
    monkeypatch.setenv("POWERTOOLS_METRICS_NAMESPACE", "EngramTest")
    monkeypatch.setenv("POWERTOOLS_TRACE_DISABLED", "true")
    monkeypatch.delenv("POWERTOOLS_METRICS_DISABLED", raising=False)


def api_event(request_id: str) -> dict[str, Any]:
    return {"version": "2.0", "requestContext": {"requestId": request_id}, "headers": {}}


def json_lines(text: str) -> list[dict[str, Any]]:
    out = []
    for raw in text.splitlines():
        line = raw.strip()
        if line.startswith("{"):
            out.append(json.loads(line))
    return out


SCENARIO = """
import json
from engram.adapters import observability
from engram.local.lambda_context import FakeLambdaContext


@observability.instrument
def handler(event, context):
    observability.logger().info("handled", extra={"route": "GET /v1/x"})
    observability.add_metric("ThingsDone", 2)
    return {"statusCode": 200}


@observability.instrument(correlation_id_path=observability.SQS_MESSAGE_ID)
def consumer(event, context):
    observability.logger().info("consumed")
    return {"batchItemFailures": []}


event = {"version": "2.0", "requestContext": {"requestId": "req-123"}, "headers": {}}
assert handler(event, FakeLambdaContext()) == {"statusCode": 200}
consumer({"Records": [{"messageId": "m-9"}]}, FakeLambdaContext())
"""


def test_logs_carry_the_correlation_id_and_metrics_flush() -> None:
    # A fresh interpreter: Powertools binds the stdlib "engram" logger to the stdout of its
    # first use, which inside pytest may be another test's captured stream.
    env = {
        "PATH": "/usr/bin:/bin",
        "POWERTOOLS_METRICS_NAMESPACE": "EngramTest",
        "POWERTOOLS_TRACE_DISABLED": "true",
        "PYTHONPATH": ":".join(sys.path),
    }
    out = subprocess.run(
        [sys.executable, "-c", SCENARIO], capture_output=True, text=True, env=env, check=True
    ).stdout
    lines = json_lines(out)
    log = next(line for line in lines if line.get("message") == "handled")
    assert log["correlation_id"] == "req-123"
    assert log["route"] == "GET /v1/x"
    assert log["service"] == "engram"
    emf = next(line for line in lines if "_aws" in line and "ThingsDone" in line)
    assert emf["_aws"]["CloudWatchMetrics"][0]["Namespace"] == "EngramTest"
    assert emf["ThingsDone"] in ([2.0], 2.0)
    log = next(line for line in lines if line.get("message") == "consumed")
    assert log["correlation_id"] == "m-9"


def test_objects_are_created_once() -> None:
    assert observability.logger() is observability.logger()
    assert observability.metrics() is observability.metrics()
    assert observability.tracer() is observability.tracer()


def test_importing_is_cheap_and_imports_no_powertools() -> None:
    code = (
        "import sys, engram.adapters.observability, engram.api.errors, engram.api.identity, "
        "engram.api.models;"
        "bad = [m for m in ('aws_lambda_powertools', 'boto3', 'redis', 'psycopg') "
        "if m in sys.modules]; print(bad)"
    )
    out = subprocess.run(
        [sys.executable, "-c", code], capture_output=True, text=True, check=True
    ).stdout.strip()
    assert out == "[]"
