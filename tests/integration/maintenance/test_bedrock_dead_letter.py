"""Malformed Bedrock output through the whole job: retried, then dead-lettered through the
real SQS adapter (moto), never lost and never stored; throttling returns the job unharmed."""

from __future__ import annotations

from collections.abc import Iterator
from typing import Any

import boto3
import pytest
from botocore.stub import Stubber
from moto import mock_aws
from tests.integration.maintenance.conftest import World
from tests.support.services import RedisTarget

from engram.adapters.bedrock_extractor import BedrockConverseExtractor
from engram.adapters.transcript_queue import SqsTranscriptQueue
from engram.extraction import TranscriptJob
from engram.maintenance import MaintenanceConfig


@pytest.fixture
def redis_target(standalone_redis: RedisTarget) -> RedisTarget:
    """The standalone server only: these tests are about extraction (PostgreSQL, SQS, Bedrock)."""
    return standalone_redis


MODEL = "anthropic.claude-3-5-haiku-20241022-v1:0"
CREDENTIALS = {"aws_access_key_id": "testing", "aws_secret_access_key": "testing"}


def text_answer(text: str) -> dict[str, Any]:
    return {
        "output": {"message": {"role": "assistant", "content": [{"text": text}]}},
        "stopReason": "end_turn",
        "usage": {"inputTokens": 100, "outputTokens": 7, "totalTokens": 107},
        "metrics": {"latencyMs": 100},
    }


@pytest.fixture
def aws() -> Iterator[dict[str, Any]]:
    with mock_aws():
        session = boto3.session.Session(region_name="us-east-1", **CREDENTIALS)
        sqs = session.client("sqs")
        url = sqs.create_queue(QueueName="extraction", Attributes={"VisibilityTimeout": "300"})
        dlq = sqs.create_queue(QueueName="extraction-dlq")
        bedrock = session.client("bedrock-runtime")
        with Stubber(bedrock) as stub:
            yield {
                "sqs": sqs,
                "url": url["QueueUrl"],
                "dlq": dlq["QueueUrl"],
                "bedrock": bedrock,
                "stub": stub,
            }


def queue_job(world: World, aws: dict[str, Any]) -> TranscriptJob:
    job = TranscriptJob.new(
        conversation_id="conv-m",
        team_id="acme",
        user_id="alice",
        messages=[{"role": "user", "content": "My favourite editor is vim."}],
        queued_at=world.clock.now_ms(),
    )
    aws["sqs"].send_message(QueueUrl=aws["url"], MessageBody=job.to_json())
    return job


def visible_and_in_flight(aws: dict[str, Any], url: str) -> tuple[int, int]:
    attrs = aws["sqs"].get_queue_attributes(
        QueueUrl=url,
        AttributeNames=["ApproximateNumberOfMessages", "ApproximateNumberOfMessagesNotVisible"],
    )["Attributes"]
    return (
        int(attrs["ApproximateNumberOfMessages"]),
        int(attrs["ApproximateNumberOfMessagesNotVisible"]),
    )


def test_malformed_output_is_retried_then_dead_lettered(world: World, aws: dict[str, Any]) -> None:
    job = queue_job(world, aws)
    for _ in range(3):  # ENGRAM_EXTRACTION_MAX_RECEIVES=3 in the world's settings
        aws["stub"].add_response("converse", text_answer("Sure! Here you go: no JSON at all"))
    queue = SqsTranscriptQueue(aws["sqs"], aws["url"], aws["dlq"], wait_time_s=0)
    extractor = BedrockConverseExtractor(model_id=MODEL, client=aws["bedrock"])
    config = MaintenanceConfig(max_receives=3, retry_base_delay_s=0)

    report = world.run(
        schedule="frequent", queue_override=queue, extractor_override=extractor, config=config
    )
    counts = report.tasks["extraction"].counts
    assert report.tasks["extraction"].error is None
    assert counts["messagesReceived"] == 3
    assert counts["jobsRetried"] == 2
    assert counts["jobsDeadLettered"] == 1
    assert counts.get("ackErrors", 0) == 0
    aws["stub"].assert_no_pending_responses()

    assert visible_and_in_flight(aws, aws["url"]) == (0, 0)  # deleted from the queue
    dead = aws["sqs"].receive_message(QueueUrl=aws["dlq"], MessageAttributeNames=["All"])
    (message,) = dead["Messages"]
    assert TranscriptJob.model_validate_json(message["Body"]) == job  # nothing lost
    reason = message["MessageAttributes"]["engramReason"]["StringValue"]
    assert reason.startswith("extraction failed")
    assert message["MessageAttributes"]["engramReceiveCount"]["StringValue"] == "3"
    assert world.sql("SELECT count(*) FROM memories") == [(0,)]


def test_throttling_returns_the_job_and_it_succeeds_when_received_again(
    world: World, aws: dict[str, Any]
) -> None:
    queue_job(world, aws)
    aws["stub"].add_client_error(
        "converse", service_error_code="ThrottlingException", http_status_code=429
    )
    aws["stub"].add_response(
        "converse",
        text_answer(
            '{"memories": [{"key": "preferred editor", "value": "vim", '
            '"confidence": 0.8, "scope": "user"}]}'
        ),
    )
    queue = SqsTranscriptQueue(aws["sqs"], aws["url"], aws["dlq"], wait_time_s=0)
    extractor = BedrockConverseExtractor(model_id=MODEL, client=aws["bedrock"])
    config = MaintenanceConfig(max_receives=3, retry_base_delay_s=0)  # back-off 0: visible now
    report = world.run(
        schedule="frequent", queue_override=queue, extractor_override=extractor, config=config
    )
    counts = report.tasks["extraction"].counts
    assert counts["messagesReceived"] == 2
    assert counts["jobsRetried"] == 1  # the throttled attempt went back to the queue
    assert counts["jobsDone"] == 1
    assert counts["proposalsCreated"] == 1
    assert counts["inputTokens"] == 100
    assert counts.get("jobsDeadLettered", 0) == 0
    aws["stub"].assert_no_pending_responses()
    assert visible_and_in_flight(aws, aws["url"]) == (0, 0)
    assert visible_and_in_flight(aws, aws["dlq"]) == (0, 0)
    rows = world.sql("SELECT key, value, status, source_channel_id FROM memories")
    assert rows == [("preferred editor", "vim", "pending_review", "conv-m")]
