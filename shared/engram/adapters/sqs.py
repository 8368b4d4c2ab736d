"""Sending to SQS: ``send_message_batch`` in batches of at most ten entries and at most
``max_batch_bytes``, all or nothing for the caller.

``SqsSender`` works with a boto3 SQS client or the local stand-in (``engram.local.sqs.LocalSqs``),
which has the same ``send_message_batch(QueueUrl=, Entries=)`` shape. Bodies that fit in one
batch go in one call (the ingest function sends one message per request: one call). Every entry
must be accepted: a failed entry, a client error or a connection problem raises
``Unavailable`` (the HTTP layer answers 503). Entries of batches already sent stay sent —
message bodies carry deterministic ids, so the client's retry is idempotent downstream.
"""

from __future__ import annotations

import logging
from collections.abc import Iterator, Mapping, Sequence
from typing import Any, Protocol

from engram import limits
from engram.batching import packed
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


def _size(body: str) -> int:
    return len(body.encode("utf-8", errors="surrogatepass"))


def batches(bodies: Sequence[str], max_bytes: int) -> Iterator[list[str]]:
    """Consecutive runs of ``bodies``, each at most ten and at most ``max_bytes`` in total
    (SQS's limits of one ``SendMessageBatch``); a body is never split."""
    return packed(bodies, size_of=_size, max_items=MAX_ENTRIES_PER_BATCH, max_size=max_bytes)


class SqsSender:
    """Sends message bodies to one queue (implements ``engram.use_cases.ports.MessageQueue``).

    ``max_batch_bytes`` is the most one ``SendMessageBatch`` may carry: the queue's maximum
    message size (SQS allows a batch as large as one message).
    """

    def __init__(
        self,
        client: SqsClient,
        queue_url: str,
        *,
        max_batch_bytes: int = limits.DEFAULT_QUEUE_MESSAGE_BYTES,
    ) -> None:
        if not queue_url:
            raise ValueError("queue_url is required")
        self.client = client
        self.queue_url = queue_url
        self.max_batch_bytes = max_batch_bytes

    def send(self, bodies: Sequence[str]) -> int:
        """Send every body; returns how many were sent. Raises ``Unavailable`` unless SQS
        accepted every one."""
        sent = 0
        for chunk in batches(bodies, self.max_batch_bytes):
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
