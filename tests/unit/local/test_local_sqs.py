"""The SQS stand-in: Lambda-shaped delivery, partial batch failures, DLQ, duplicates, order."""

from __future__ import annotations

import json
import threading
from collections import Counter
from collections.abc import Iterator
from typing import Any

import pytest

from engram.local.sqs import LocalQueue, LocalSqs, LocalSqsError


class Consumer:
    """Records every delivery; fails the bodies it is told to fail (for n receives)."""

    def __init__(self) -> None:
        self.records: list[dict[str, Any]] = []
        self.batches: list[list[str]] = []
        self.fail: dict[str, int] = {}  # body -> receives to fail (-1 = always)
        self.raise_times = 0
        self.lock = threading.Lock()

    def __call__(self, event: dict[str, Any], context: Any) -> dict[str, Any]:
        assert context.get_remaining_time_in_millis() > 0
        with self.lock:
            self.batches.append([r["body"] for r in event["Records"]])
            self.records.extend(event["Records"])
            if self.raise_times > 0:
                self.raise_times -= 1
                raise RuntimeError("consumer crashed mid-batch")
            failures = []
            for record in event["Records"]:
                left = self.fail.get(record["body"], 0)
                if left != 0:
                    self.fail[record["body"]] = left - 1 if left > 0 else -1
                    failures.append({"itemIdentifier": record["messageId"]})
        return {"batchItemFailures": failures}

    def bodies(self) -> Counter[str]:
        with self.lock:
            return Counter(r["body"] for r in self.records)


@pytest.fixture
def consumer() -> Consumer:
    return Consumer()


@pytest.fixture
def queue(consumer: Consumer) -> Iterator[LocalQueue]:
    q = LocalQueue("ingest", consumer, visibility_timeout_s=0.02, max_receive_count=3).start()
    yield q
    q.stop()


def send(q: LocalQueue, *bodies: str) -> dict[str, Any]:
    return q.send_message_batch([{"Id": str(i), "MessageBody": b} for i, b in enumerate(bodies)])


def test_records_are_sqs_shaped(queue: LocalQueue, consumer: Consumer) -> None:
    result = send(queue, json.dumps({"n": 1}))
    assert result["Successful"][0]["Id"] == "0"
    assert "Failed" not in result
    assert queue.drain(5)
    record = consumer.records[0]
    assert record["messageId"] == result["Successful"][0]["MessageId"]
    assert record["body"] == '{"n": 1}'
    assert record["attributes"]["ApproximateReceiveCount"] == "1"
    assert record["eventSource"] == "aws:sqs"
    assert record["eventSourceARN"] == "arn:aws:sqs:us-east-1:000000000000:ingest"
    assert record["receiptHandle"]
    assert record["md5OfBody"] == result["Successful"][0]["MD5OfMessageBody"]


def test_partial_failures_are_redelivered_alone(queue: LocalQueue, consumer: Consumer) -> None:
    consumer.fail = {"b": 1}
    send(queue, "a", "b", "c")
    assert queue.drain(5)
    assert consumer.bodies() == Counter({"a": 1, "b": 2, "c": 1})
    second = [r for r in consumer.records if r["body"] == "b"][1]
    assert second["attributes"]["ApproximateReceiveCount"] == "2"
    assert queue.dead_letters == []


def test_record_goes_to_dlq_after_max_receives(queue: LocalQueue, consumer: Consumer) -> None:
    consumer.fail = {"poison": -1}
    send(queue, "ok", "poison")
    assert queue.drain(5)
    assert consumer.bodies() == Counter({"ok": 1, "poison": 3})
    assert [d["body"] for d in queue.dead_letters] == ["poison"]
    assert queue.dead_letters[0]["attributes"]["ApproximateReceiveCount"] == "3"
    assert queue.stats.dead_lettered == 1


def test_a_crashing_consumer_retries_the_whole_batch(queue: LocalQueue, consumer: Consumer) -> None:
    consumer.raise_times = 1
    send(queue, "a", "b")
    assert queue.drain(5)
    assert consumer.bodies() == Counter({"a": 2, "b": 2})
    assert queue.dead_letters == []


def test_unknown_item_identifier_fails_the_whole_batch() -> None:
    calls: list[list[str]] = []

    def bad(event: dict[str, Any], context: Any) -> dict[str, Any]:
        calls.append([r["body"] for r in event["Records"]])
        if len(calls) == 1:
            return {"batchItemFailures": [{"itemIdentifier": "not-a-message-id"}]}
        return {"batchItemFailures": []}

    q = LocalQueue("q", bad, visibility_timeout_s=0.01)
    send(q, "a", "b")
    assert q.process_once() == 2
    assert q.drain(0) is False  # both are back (invisible for a moment)
    q.start()
    try:
        assert q.drain(5)
    finally:
        q.stop()
    assert calls[1] == ["a", "b"]


def test_injected_duplicates_share_the_message_id(queue: LocalQueue, consumer: Consumer) -> None:
    queue.duplicate_next(1)
    send(queue, "once-sent", "other")
    assert queue.drain(5)
    dup = [r for r in consumer.records if r["body"] == "once-sent"]
    assert len(dup) == 2
    assert dup[0]["messageId"] == dup[1]["messageId"]
    assert dup[0]["receiptHandle"] != dup[1]["receiptHandle"]
    assert consumer.bodies()["other"] == 1


def test_out_of_order_delivery(consumer: Consumer) -> None:
    q = LocalQueue("q", consumer, batch_size=1, out_of_order=True, seed=7)
    bodies = [str(i) for i in range(20)]
    for i in range(0, 20, 10):
        send(q, *bodies[i : i + 10])
    while q.process_once():
        pass
    delivered = [b[0] for b in consumer.batches]
    assert sorted(delivered, key=int) == bodies
    assert delivered != bodies


def test_in_order_by_default(consumer: Consumer) -> None:
    q = LocalQueue("q", consumer, batch_size=3)
    send(q, "1", "2", "3", "4", "5")
    while q.process_once():
        pass
    assert consumer.batches == [["1", "2", "3"], ["4", "5"]]


def test_send_faults(consumer: Consumer) -> None:
    q = LocalQueue("q", consumer)
    q.fail_sends = lambda entry: entry["MessageBody"] == "bad"
    result = send(q, "good", "bad")
    assert [s["Id"] for s in result["Successful"]] == ["0"]
    assert result["Failed"][0]["Id"] == "1"
    assert result["Failed"][0]["SenderFault"] is False
    q.fail_sends = None
    q.send_error = ConnectionError("sqs is down")
    with pytest.raises(ConnectionError):
        send(q, "x")
    assert q.pending() == 1


def test_batch_request_rules() -> None:
    q = LocalQueue("q")
    with pytest.raises(LocalSqsError) as info:
        send(q, *["x"] * 11)
    assert info.value.code == "TooManyEntriesInBatchRequest"
    with pytest.raises(LocalSqsError):
        q.send_message_batch([{"Id": "a", "MessageBody": "x"}, {"Id": "a", "MessageBody": "y"}])
    with pytest.raises(LocalSqsError):
        q.send_message_batch([])
    with pytest.raises(LocalSqsError):
        send(q, "x" * (200 * 1024), "y" * (100 * 1024))
    assert q.pending() == 0
    small = LocalQueue("small", max_message_bytes=2048)  # the queue's MaximumMessageSize
    with pytest.raises(LocalSqsError) as info:
        send(small, "x" * 1500, "y" * 1000)
    assert info.value.code == "BatchRequestTooLong"
    send(small, "x" * 1500, "y" * 500)
    empty = small.send_message_batch([{"Id": "0", "MessageBody": ""}])
    assert empty["Failed"][0]["Code"] == "InvalidParameterValue"
    assert small.pending() == 2


def test_client_shaped_front_routes_by_url(consumer: Consumer) -> None:
    sqs = LocalSqs()
    url = sqs.add_queue(LocalQueue("ingest", consumer))
    assert sqs.get_queue_url(QueueName="ingest") == {"QueueUrl": url}
    result = sqs.send_message_batch(QueueUrl=url, Entries=[{"Id": "e1", "MessageBody": "m"}])
    assert result["Successful"][0]["Id"] == "e1"
    assert sqs.send_message(QueueUrl="ingest", MessageBody="n")["MessageId"]
    sqs.start()
    assert sqs.drain_and_stop(5)
    assert consumer.bodies() == Counter({"m": 1, "n": 1})
    with pytest.raises(LocalSqsError):
        sqs.send_message_batch(QueueUrl="nope", Entries=[{"Id": "1", "MessageBody": "x"}])


def test_drain_times_out_while_work_is_stuck() -> None:
    q = LocalQueue("q", None)
    send(q, "x")
    assert q.drain(0.05) is False
