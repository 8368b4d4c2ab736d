"""The extraction queue on Amazon SQS (``engram.maintenance.ports.TranscriptQueue``).

The maintenance job polls this queue itself (no event source mapping):

* ``receive`` — ``ReceiveMessage`` (a 1 s long poll by default) with
  ``ApproximateReceiveCount``, so the drain policy knows how many attempts a transcript had;
* ``delete`` — ``DeleteMessage`` once the transcript was processed (or dead-lettered);
* ``release`` — ``ChangeMessageVisibility`` to ``delay_s``: the message comes back after the
  back-off instead of after the queue's whole visibility timeout;
* ``dead_letter`` — ``SendMessage`` of the original body to the dead-letter queue with the
  reason as message attributes; the job deletes the original only after this succeeded.

The queue's own redrive policy stays as a backstop (a job that crashes between receive and
delete); its ``maxReceiveCount`` should be at least ``ENGRAM_EXTRACTION_MAX_RECEIVES`` so that the
job dead-letters with a reason first. Errors from botocore propagate: the job reports them and
the message comes back after its visibility timeout.
"""

from __future__ import annotations

from typing import Any

from engram.maintenance.models import QueueMessage

MAX_VISIBILITY_S = 43_200
MAX_ATTRIBUTE_CHARS = 1000


class SqsTranscriptQueue:
    def __init__(
        self,
        client: Any,
        queue_url: str,
        dlq_url: str | None,
        *,
        visibility_timeout_s: int | None = None,
        wait_time_s: int = 1,
    ) -> None:
        """``client``: a boto3 SQS client; ``dlq_url``: where ``dead_letter`` sends
        (``ENGRAM_EXTRACTION_DLQ_URL``; without it ``dead_letter`` raises and SQS's redrive
        policy is the only dead-letter path); ``visibility_timeout_s``: per-receive override
        (None: the queue's); ``wait_time_s``: long-poll wait of a receive (1 s: every SQS
        server is asked, so an empty answer means an empty queue; 0 = short poll, which may
        answer empty while messages wait elsewhere)."""
        if not queue_url:
            raise ValueError("queue_url is required")
        self.client = client
        self.queue_url = queue_url
        self.dlq_url = dlq_url
        self.visibility_timeout_s = visibility_timeout_s
        self.wait_time_s = max(0, min(20, wait_time_s))

    def receive(self, max_messages: int) -> list[QueueMessage]:
        request: dict[str, Any] = {
            "QueueUrl": self.queue_url,
            "MaxNumberOfMessages": max(1, min(10, max_messages)),
            "WaitTimeSeconds": self.wait_time_s,
            "MessageSystemAttributeNames": ["ApproximateReceiveCount"],
        }
        if self.visibility_timeout_s is not None:
            request["VisibilityTimeout"] = self.visibility_timeout_s
        response = self.client.receive_message(**request)
        out: list[QueueMessage] = []
        for raw in response.get("Messages") or []:
            attributes = raw.get("Attributes") or {}
            out.append(
                QueueMessage(
                    message_id=str(raw["MessageId"]),
                    receipt=str(raw["ReceiptHandle"]),
                    receive_count=int(attributes.get("ApproximateReceiveCount", "1")),
                    body=str(raw.get("Body", "")),
                )
            )
        return out

    def delete(self, receipt: str) -> None:
        self.client.delete_message(QueueUrl=self.queue_url, ReceiptHandle=receipt)

    def release(self, receipt: str, delay_s: int) -> None:
        self.client.change_message_visibility(
            QueueUrl=self.queue_url,
            ReceiptHandle=receipt,
            VisibilityTimeout=max(0, min(MAX_VISIBILITY_S, int(delay_s))),
        )

    def dead_letter(self, message: QueueMessage, reason: str) -> None:
        if not self.dlq_url:
            raise RuntimeError("no dead-letter queue configured (ENGRAM_EXTRACTION_DLQ_URL)")
        body = message.body if isinstance(message.body, str) else message.body.to_json()
        self.client.send_message(
            QueueUrl=self.dlq_url,
            MessageBody=body or "(empty)",
            MessageAttributes={
                "engramReason": {
                    "DataType": "String",
                    "StringValue": (reason or "unknown")[:MAX_ATTRIBUTE_CHARS],
                },
                "engramSourceMessageId": {"DataType": "String", "StringValue": message.message_id},
                "engramReceiveCount": {
                    "DataType": "Number",
                    "StringValue": str(message.receive_count),
                },
            },
        )
