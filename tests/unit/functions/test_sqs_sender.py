"""``SqsSender``: chunks of ten against moto's SQS; any refused entry is ``Unavailable``."""

from __future__ import annotations

from collections.abc import Iterator, Mapping, Sequence
from typing import Any

import boto3
import pytest
from moto import mock_aws

from engram.adapters.sqs import SqsSender
from engram.errors import Unavailable


@pytest.fixture
def sqs(monkeypatch: pytest.MonkeyPatch) -> Iterator[Any]:
    for name, value in {
        "AWS_ACCESS_KEY_ID": "testing",
        "AWS_SECRET_ACCESS_KEY": "testing",
        "AWS_DEFAULT_REGION": "eu-west-1",
    }.items():
        monkeypatch.setenv(name, value)
    with mock_aws():
        yield boto3.client("sqs", region_name="eu-west-1")


def drain(sqs: Any, url: str) -> list[str]:
    bodies: list[str] = []
    while True:
        got = sqs.receive_message(QueueUrl=url, MaxNumberOfMessages=10).get("Messages", [])
        if not got:
            return bodies
        for message in got:
            bodies.append(message["Body"])
            sqs.delete_message(QueueUrl=url, ReceiptHandle=message["ReceiptHandle"])


def test_every_body_is_sent_in_chunks_of_ten(sqs: Any) -> None:
    url = sqs.create_queue(QueueName="ingest")["QueueUrl"]
    bodies = [f'{{"n": {i}}}' for i in range(25)]
    assert SqsSender(sqs, url).send(bodies) == 25
    assert sorted(drain(sqs, url)) == sorted(bodies)


class Recording:
    def __init__(self, fail_ids: Sequence[str] = (), error: Exception | None = None) -> None:
        self.calls: list[list[Mapping[str, Any]]] = []
        self.fail_ids = set(fail_ids)
        self.error = error

    def send_message_batch(
        self,
        *,
        QueueUrl: str,  # noqa: N803
        Entries: Sequence[Mapping[str, Any]],  # noqa: N803
    ) -> dict[str, Any]:
        self.calls.append(list(Entries))
        if self.error is not None:
            raise self.error
        ok = [{"Id": e["Id"], "MessageId": "m"} for e in Entries if e["Id"] not in self.fail_ids]
        failed = [
            {"Id": e["Id"], "SenderFault": False, "Code": "InternalError", "Message": "x"}
            for e in Entries
            if e["Id"] in self.fail_ids
        ]
        return {"Successful": ok, "Failed": failed}


def test_chunks_have_at_most_ten_distinct_entries() -> None:
    client = Recording()
    SqsSender(client, "https://q").send([str(i) for i in range(21)])
    assert [len(c) for c in client.calls] == [10, 10, 1]
    assert all(len({e["Id"] for e in c}) == len(c) for c in client.calls)


def test_one_refused_entry_is_unavailable() -> None:
    client = Recording(fail_ids=["4"])
    with pytest.raises(Unavailable):
        SqsSender(client, "https://q").send([str(i) for i in range(5)])


def test_a_client_error_is_unavailable(sqs: Any) -> None:
    with pytest.raises(Unavailable):
        SqsSender(sqs, "https://sqs.eu-west-1.amazonaws.com/123456789012/missing").send(["x"])
    with pytest.raises(Unavailable):
        SqsSender(Recording(error=ConnectionError("down")), "https://q").send(["x"])


def test_a_response_missing_an_entry_is_unavailable() -> None:
    class Silent(Recording):
        def send_message_batch(self, **kwargs: Any) -> dict[str, Any]:
            return {"Successful": []}

    with pytest.raises(Unavailable):
        SqsSender(Silent(), "https://q").send(["x"])
