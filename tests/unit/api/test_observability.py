"""Handlers instrumented once: JSON logs with the request id, EMF metrics, lazy creation."""

from __future__ import annotations

import json
import subprocess
import sys
from typing import Any

import pytest

from engram import observability
from engram.local.server import FakeLambdaContext


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


def test_logs_carry_the_correlation_id_and_metrics_flush(
    capsys: pytest.CaptureFixture[str],
) -> None:
    @observability.instrument
    def handler(event: dict[str, Any], context: Any) -> dict[str, Any]:
        observability.logger().info("handled", extra={"route": "GET /v1/x"})
        observability.add_metric("ThingsDone", 2)
        return {"statusCode": 200}

    assert handler(api_event("req-123"), FakeLambdaContext()) == {"statusCode": 200}
    lines = json_lines(capsys.readouterr().out)
    log = next(line for line in lines if line.get("message") == "handled")
    assert log["correlation_id"] == "req-123"
    assert log["route"] == "GET /v1/x"
    assert log["service"] == "engram"
    emf = next(line for line in lines if "_aws" in line and "ThingsDone" in line)
    assert emf["_aws"]["CloudWatchMetrics"][0]["Namespace"] == "EngramTest"
    assert emf["ThingsDone"] in ([2.0], 2.0)

    # (one test: Powertools binds the stdlib "engram" logger to the stdout of its first use)
    @observability.instrument(correlation_id_path=observability.SQS_MESSAGE_ID)
    def consumer(event: dict[str, Any], context: Any) -> dict[str, Any]:
        observability.logger().info("consumed")
        return {"batchItemFailures": []}

    consumer({"Records": [{"messageId": "m-9"}]}, FakeLambdaContext())
    log = next(x for x in json_lines(capsys.readouterr().out) if x.get("message") == "consumed")
    assert log["correlation_id"] == "m-9"


def test_objects_are_created_once() -> None:
    assert observability.logger() is observability.logger()
    assert observability.metrics() is observability.metrics()
    assert observability.tracer() is observability.tracer()


def test_importing_is_cheap_and_imports_no_powertools() -> None:
    code = (
        "import sys, engram.observability, engram.api.errors, engram.api.identity, "
        "engram.api.models;"
        "bad = [m for m in ('aws_lambda_powertools', 'boto3', 'redis', 'psycopg') "
        "if m in sys.modules]; print(bad)"
    )
    out = subprocess.run(
        [sys.executable, "-c", code], capture_output=True, text=True, check=True
    ).stdout.strip()
    assert out == "[]"
