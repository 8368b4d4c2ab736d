"""The SQS adapter of the extraction queue against moto's SQS."""

from __future__ import annotations

from collections.abc import Iterator
from typing import Any

import boto3
import pytest
from moto import mock_aws

from engram.adapters.transcript_queue import SqsTranscriptQueue
from engram.extraction import TranscriptJob


@pytest.fixture
def sqs() -> Iterator[Any]:
    with mock_aws():
        yield boto3.client(
            "sqs",
            region_name="us-east-1",
            aws_access_key_id="testing",
            aws_secret_access_key="testing",
        )


def make_queues(sqs: Any) -> tuple[str, str]:
    main = sqs.create_queue(QueueName="extraction", Attributes={"VisibilityTimeout": "60"})
    dlq = sqs.create_queue(QueueName="extraction-dlq")
    return main["QueueUrl"], dlq["QueueUrl"]


def test_receive_release_delete_with_receive_counts(sqs: Any) -> None:
    url, dlq = make_queues(sqs)
    queue = SqsTranscriptQueue(sqs, url, dlq, wait_time_s=0)
    assert queue.receive(10) == []
    sqs.send_message(QueueUrl=url, MessageBody='{"a": 1}')
    first = queue.receive(10)
    assert [(m.body, m.receive_count) for m in first] == [('{"a": 1}', 1)]
    assert queue.receive(10) == []  # invisible while in flight
    queue.release(first[0].receipt, 0)
    second = queue.receive(10)
    assert [(m.message_id, m.receive_count) for m in second] == [(first[0].message_id, 2)]
    queue.release(second[0].receipt, 600)  # backed off: not visible again soon
    assert queue.receive(10) == []


def test_delete_removes_the_message(sqs: Any) -> None:
    url, dlq = make_queues(sqs)
    queue = SqsTranscriptQueue(sqs, url, dlq, visibility_timeout_s=0, wait_time_s=0)
    sqs.send_message(QueueUrl=url, MessageBody="x")
    (msg,) = queue.receive(1)
    queue.delete(msg.receipt)
    assert queue.receive(10) == []


def test_dead_letter_copies_body_and_reason(sqs: Any) -> None:
    url, dlq = make_queues(sqs)
    queue = SqsTranscriptQueue(sqs, url, dlq, wait_time_s=0)
    job = TranscriptJob.new(
        conversation_id="c1",
        team_id="t1",
        user_id="u1",
        messages=[{"role": "user", "content": "hi"}],
        queued_at=5,
    )
    sqs.send_message(QueueUrl=url, MessageBody=job.to_json())
    (msg,) = queue.receive(1)
    queue.dead_letter(msg, "extraction failed: malformed output")
    got = sqs.receive_message(QueueUrl=dlq, MessageAttributeNames=["All"])["Messages"]
    assert [m["Body"] for m in got] == [job.to_json()]
    attrs = got[0]["MessageAttributes"]
    assert attrs["engramReason"]["StringValue"] == "extraction failed: malformed output"
    assert attrs["engramSourceMessageId"]["StringValue"] == msg.message_id
    assert attrs["engramReceiveCount"]["StringValue"] == "1"


def test_dead_letter_without_a_dlq_raises(sqs: Any) -> None:
    url, _ = make_queues(sqs)
    queue = SqsTranscriptQueue(sqs, url, None, wait_time_s=0)
    sqs.send_message(QueueUrl=url, MessageBody="x")
    (msg,) = queue.receive(1)
    with pytest.raises(RuntimeError, match="ENGRAM_EXTRACTION_DLQ_URL"):
        queue.dead_letter(msg, "r")


def test_receive_long_polls_one_second_by_default() -> None:
    from botocore.stub import Stubber

    client = boto3.client(
        "sqs", region_name="us-east-1", aws_access_key_id="x", aws_secret_access_key="x"
    )
    url = "https://sqs.us-east-1.amazonaws.com/123456789012/extraction"
    with Stubber(client) as stub:
        stub.add_response(
            "receive_message",
            {"Messages": []},
            {
                "QueueUrl": url,
                "MaxNumberOfMessages": 10,
                "WaitTimeSeconds": 1,
                "MessageSystemAttributeNames": ["ApproximateReceiveCount"],
            },
        )
        assert SqsTranscriptQueue(client, url, None).receive(50) == []
        stub.assert_no_pending_responses()
