"""Sending to SQS: ``send_message_batch`` in chunks of ten, all or nothing for the caller.

``SqsSender`` works with a boto3 SQS client or the local stand-in (``engram.local.sqs.LocalSqs``),
which has the same ``send_message_batch(QueueUrl=, Entries=)`` shape. Every entry must be
accepted: a failed entry, a client error or a connection problem raises ``Unavailable`` (the
HTTP layer answers 503). Entries of chunks already sent stay sent — message bodies carry
deterministic ids, so the client's retry is idempotent downstream.
"""

from __future__ import annotations

import logging
from collections.abc import Mapping, Sequence
from typing import Any, Protocol

from engram.errors import Unavailable

_log = logging.getLogger("engram.adapters.sqs")

MAX_ENTRIES_PER_BATCH = 10


class SqsClient(Protocol):
    def send_message_batch(
        self,
        *,
        QueueUrl: str,  # noqa: N803
        Entries: Sequence[Mapping[str, Any]],  # noqa: N803
    ) -> Mapping[str, Any]: ...


def sqs_client(region: str | None = None) -> Any:
    """A boto3 SQS client (boto3 imported here, not at module import)."""
    import boto3

    return boto3.client("sqs", region_name=region)


class SqsSender:
    """Sends message bodies to one queue (implements ``engram.use_cases.ports.MessageQueue``)."""

    def __init__(self, client: SqsClient, queue_url: str) -> None:
        if not queue_url:
            raise ValueError("queue_url is required")
        self.client = client
        self.queue_url = queue_url

    def send(self, bodies: Sequence[str]) -> int:
        """Send every body; returns how many were sent. Raises ``Unavailable`` unless SQS
        accepted every one."""
        sent = 0
        for start in range(0, len(bodies), MAX_ENTRIES_PER_BATCH):
            chunk = bodies[start : start + MAX_ENTRIES_PER_BATCH]
            entries = [{"Id": str(i), "MessageBody": body} for i, body in enumerate(chunk)]
            try:
                response = self.client.send_message_batch(QueueUrl=self.queue_url, Entries=entries)
            except Exception as exc:
                _log.warning("SQS send_message_batch failed: %s", type(exc).__name__)
                raise Unavailable("the queue did not accept the request; retry") from exc
            failed = list(response.get("Failed") or [])
            ok = {str(item.get("Id")) for item in response.get("Successful") or []}
            if failed or any(e["Id"] not in ok for e in entries):
                codes = sorted({str(f.get("Code", "?")) for f in failed})
                _log.warning("SQS rejected %d of %d entries: %s", len(failed), len(entries), codes)
                raise Unavailable("the queue did not accept every record; retry")
            sent += len(chunk)
        return sent
