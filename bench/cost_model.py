"""Dollars per million observations and per million session starts, from a bench run.

Inputs: what the run measured (handler durations, consumer rates, Redis commands, bytes and
script time per observation or session, bytes stored per observation), the template's memory
sizes and batching values (``infra.config``, the prod stage), and the dated price table of
docs/deployment.md (read from that file, so there is one table). The formulas are those of
docs/operations.md ("Cost per million"); ``SQS_CALL_MS`` and ``ACU_PER_VCPU`` are stated
assumptions (they cannot be measured offline).
"""

from __future__ import annotations

import math
import re
from dataclasses import dataclass
from pathlib import Path
from typing import Any

REPO = Path(__file__).resolve().parents[1]
PRICE_DOC = REPO / "docs" / "deployment.md"
MILLION = 1_000_000
#: SQS bills a request per 64 KiB of payload.
SQS_CHUNK = 64 * 1024
#: Lambda's invoke payload limit: the event source mapping's batches stay under it.
INVOKE_PAYLOAD = 6 * 1024 * 1024
#: The fields of one SQS record around its body in the Lambda event (messageId, receipt
#: handle, attributes...): about 1 KiB.
RECORD_FIELDS = 1024
#: ReceiveMessage returns at most ten messages; DeleteMessageBatch deletes at most ten.
PER_RECEIVE = 10
#: Assumed: one SQS call from a function in the VPC (through the interface endpoint), ms.
SQS_CALL_MS = 10.0
#: Assumed: ACUs that one busy vCPU of PostgreSQL costs (an ACU is ~2 GiB with its share of
#: CPU; a provisioned r6g.large has 16 GiB and 2 vCPUs: 8 ACUs for 2 vCPUs).
ACU_PER_VCPU = 4.0
#: Hours an observation stays in Redis: consolidated observations are pruned 7 days after they
#: were created (the round after that), unconsolidated ones at the 30-day retention window.
STORED_HOURS = {"7 days": 7 * 24, "30 days": 30 * 24}


def prices(doc: Path = PRICE_DOC) -> tuple[str, dict[str, float]]:
    """The price table's date and its prices by key (``a`` / ``b`` rows split in two)."""
    text = doc.read_text(encoding="utf-8").split("### Price table", 1)[1].split("\n### ", 1)[0]
    date = re.search(r"as of (\d{4}-\d{2}-\d{2})", text)
    out: dict[str, float] = {}
    for line in text.splitlines():
        cells = [c.strip() for c in line.strip().strip("|").split("|")]
        if len(cells) != 4 or not cells[0].startswith("`"):
            continue
        keys = [k.strip().strip("`") for k in cells[0].split("/")]
        values = [v.strip() for v in cells[3].split("/")]
        if len(keys) != len(values):
            continue
        for key, value in zip(keys, values, strict=True):
            out[key] = float(value)
    return (date.group(1) if date else "undated"), out


def stage_values(stage: str = "prod") -> dict[str, Any]:
    """Memory sizes and batching values of ``stage`` from the template's configuration."""
    from infra.config import STAGES

    config = STAGES[stage]
    return {
        "stage": stage,
        "ingestMemoryMb": config.function("ingest").memory_mb,
        "consumerMemoryMb": config.function("ingest_consumer").memory_mb,
        "sessionMemoryMb": config.function("session").memory_mb,
        "batchSize": config.ingest_batch_size,
    }


def ecpus(commands: float, net_bytes: float) -> float:
    """ElastiCache Serverless ECPUs of some work (an estimate): a simple command costs 1 ECPU
    per KiB it moves, at least 1; a script costs what the commands it runs would (AWS bills a
    script by its vCPU time, which those commands are most of). So: the larger of the commands
    the server ran (a script's own included) and the KiB moved."""
    return max(commands, net_bytes / 1024)


@dataclass
class IngestRun:
    """What a run measured for one way of ingesting (before or after)."""

    observations_per_request: int
    messages_per_request: int
    message_bytes: int  # one message's body
    queue_calls_per_request: int
    ingest_handler_ms: float  # the ingest handler per request, its queue call excluded
    consumer_obs_per_s: float
    observations_per_message: int
    redis_ecpus_per_observation: float  # consumer side
    request_ecpus: float  # ingest side per request (rate limiter script)
    stored_bytes_per_observation: float


def per_million_observations(run: IngestRun, stage: dict[str, Any]) -> dict[str, Any]:
    """Dollars per million observations, by line (see docs/operations.md)."""
    date, p = prices()
    r = run.observations_per_request
    requests = MILLION / r
    messages = requests * run.messages_per_request
    ingest_s = (run.ingest_handler_ms + run.queue_calls_per_request * SQS_CALL_MS) / 1000
    ingest_gb = stage["ingestMemoryMb"] / 1024
    consumer_gb = stage["consumerMemoryMb"] / 1024
    per_invoke = min(stage["batchSize"], INVOKE_PAYLOAD // (run.message_bytes + RECORD_FIELDS))
    invokes = messages / per_invoke
    send_billed = math.ceil(run.message_bytes * run.messages_per_request / SQS_CHUNK) or 1
    sends = requests * max(run.queue_calls_per_request, send_billed)
    receives = messages / PER_RECEIVE * math.ceil(PER_RECEIVE * run.message_bytes / SQS_CHUNK)
    deletes = messages / PER_RECEIVE
    redis_ecpu = MILLION * run.redis_ecpus_per_observation + requests * run.request_ecpus
    stored_gb = MILLION * run.stored_bytes_per_observation / 1024**3
    lines = {
        "apiGateway": requests * p["http-api-request"] / MILLION,
        "ingestLambdaRequests": requests * p["lambda-request"] / MILLION,
        "ingestLambdaCompute": requests * ingest_s * ingest_gb * p["lambda-arm-gbs"],
        "sqsRequests": (sends + receives + deletes) * p["sqs-request"] / MILLION,
        "consumerLambdaRequests": invokes * p["lambda-request"] / MILLION,
        "consumerLambdaCompute": MILLION
        / run.consumer_obs_per_s
        * consumer_gb
        * p["lambda-arm-gbs"],
        "elasticacheEcpus": redis_ecpu * p["valkey-ecpu"] / MILLION,
        "aurora": 0.0,  # ingest never touches PostgreSQL
    }
    total = sum(lines.values())
    # storage is paid for as long as observations are kept, the same before and after
    storage = {
        kept: round(stored_gb * hours * p["valkey-storage"], 4)
        for kept, hours in STORED_HOURS.items()
    }
    return {
        "priceTableDate": date,
        "observationsPerRequest": r,
        "counts": {
            "requests": round(requests),
            "messages": round(messages),
            "consumerInvokes": round(invokes),
            "messagesPerInvoke": per_invoke,
            "sqsBilledRequests": round(sends + receives + deletes),
            "ingestGbSeconds": round(requests * ingest_s * ingest_gb, 1),
            "consumerGbSeconds": round(MILLION / run.consumer_obs_per_s * consumer_gb, 1),
            "ecpus": round(redis_ecpu),
        },
        "dollars": {k: round(v, 4) for k, v in lines.items()},
        "total": round(total, 4),
        "storageWhileKept": storage,
        "storedGb": round(stored_gb, 3),
    }


def per_million_sessions(
    *, session_ms: float, postgres_ms: float, ecpus_per_session: float, stage: dict[str, Any]
) -> dict[str, Any]:
    """Dollars per million session starts (``POST /v1/sessions``), by line."""
    date, p = prices()
    gb = stage["sessionMemoryMb"] / 1024
    acu_seconds = postgres_ms / 1000 * ACU_PER_VCPU
    lines = {
        "apiGateway": p["http-api-request"],
        "sessionLambdaRequests": p["lambda-request"],
        "sessionLambdaCompute": MILLION * session_ms / 1000 * gb * p["lambda-arm-gbs"],
        "elasticacheEcpus": ecpus_per_session * p["valkey-ecpu"],
        "auroraAcuSeconds": MILLION * acu_seconds * p["aurora-acu"] / 3600,
    }
    return {
        "priceTableDate": date,
        "inputs": {
            "sessionMs": session_ms,
            "postgresMs": postgres_ms,
            "ecpusPerSession": round(ecpus_per_session, 1),
            "acuSecondsPerSession": round(acu_seconds, 4),
        },
        "dollars": {k: round(v, 4) for k, v in lines.items()},
        "total": round(sum(lines.values()), 4),
    }
