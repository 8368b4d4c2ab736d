"""The event buses: Amazon EventBridge (AWS), and a JSONL file with an optional webhook (local).

``EventBridgeBus.put`` is one ``PutEvents`` request of at most 10 entries and 256 KB (sizes as
EventBridge counts them: source, detail type and detail in UTF-8 bytes). EventBridge answers a
partial failure with HTTP 200, ``FailedEntryCount`` > 0 and an ``ErrorCode`` on each refused
entry, in request order: each entry gets its own result, so the relay re-sends only those. A
client error or a connection problem raises (every entry of the request is retried). The event
id consumers deduplicate on is ``detail.eventId``: EventBridge gives every put its own ``id``.
"""

from __future__ import annotations

import json
import logging
import os
import threading
import urllib.request
from collections.abc import Sequence
from pathlib import Path
from typing import Any

from engram.events.models import SOURCE
from engram.events.ports import OutboxEntry, PutResult

_log = logging.getLogger("engram.adapters.eventbridge")

MAX_ENTRIES = 10
MAX_REQUEST_BYTES = 256 * 1024


def events_client(region: str | None = None, *, endpoint_url: str | None = None) -> Any:
    """A boto3 EventBridge client (boto3 imported here, not at module import)."""
    import boto3
    from botocore.config import Config

    return boto3.client(
        "events",
        region_name=region,
        endpoint_url=endpoint_url,
        config=Config(connect_timeout=2, read_timeout=5, retries={"mode": "standard"}),
    )


def _detail(entry: OutboxEntry) -> str:
    return json.dumps(entry.detail, separators=(",", ":"), sort_keys=True)


class EventBridgeBus:
    max_entries = MAX_ENTRIES
    max_bytes = MAX_REQUEST_BYTES

    def __init__(self, client: Any, bus_name: str, *, source: str = SOURCE) -> None:
        self._client = client
        self._bus = bus_name
        self._source = source

    def entry_size(self, entry: OutboxEntry) -> int:
        return (
            len(self._source.encode())
            + len(entry.event_type.encode())
            + len(_detail(entry).encode())
        )

    def put(self, entries: Sequence[OutboxEntry]) -> Sequence[PutResult]:
        response = self._client.put_events(
            Entries=[
                {
                    "Source": self._source,
                    "DetailType": entry.event_type,
                    "Detail": _detail(entry),
                    "EventBusName": self._bus,
                }
                for entry in entries
            ]
        )
        answers = list(response.get("Entries", []))
        results = []
        for i, entry in enumerate(entries):
            answer = answers[i] if i < len(answers) else {"ErrorCode": "NoAnswer"}
            if answer.get("EventId") and not answer.get("ErrorCode"):
                results.append(PutResult(entry.event_id, accepted=True))
            else:
                error = f"{answer.get('ErrorCode')}: {answer.get('ErrorMessage', '')}"
                results.append(PutResult(entry.event_id, accepted=False, error=error))
        return results


class JsonlBus:
    """Locally: every event appended as one JSON line to ``path`` (``source``, ``detail-type``,
    ``detail``; written and fsynced before it counts as accepted), then, when ``webhook_url``
    is set, POSTed there as the same JSON object; an entry the webhook does not answer with 2xx
    is refused (and retried; it may then be in the file twice, with the same event id)."""

    max_entries = MAX_ENTRIES
    max_bytes = MAX_REQUEST_BYTES

    def __init__(
        self, path: Path, *, webhook_url: str | None = None, timeout_s: float = 5.0
    ) -> None:
        self.path = path
        self._webhook = webhook_url
        self._timeout_s = timeout_s
        self._lock = threading.Lock()

    def entry_size(self, entry: OutboxEntry) -> int:
        return len(SOURCE) + len(entry.event_type) + len(_detail(entry).encode())

    def _record(self, entry: OutboxEntry) -> dict[str, Any]:
        return {"source": SOURCE, "detail-type": entry.event_type, "detail": entry.detail}

    def put(self, entries: Sequence[OutboxEntry]) -> Sequence[PutResult]:
        self.path.parent.mkdir(parents=True, exist_ok=True)
        lines = "".join(json.dumps(self._record(e), separators=(",", ":")) + "\n" for e in entries)
        with self._lock, self.path.open("a", encoding="utf-8") as fh:
            fh.write(lines)
            fh.flush()
            os.fsync(fh.fileno())
        if not self._webhook:
            return [PutResult(e.event_id, accepted=True) for e in entries]
        return [self._post(e) for e in entries]

    def _post(self, entry: OutboxEntry) -> PutResult:
        assert self._webhook is not None
        body = json.dumps(self._record(entry)).encode()
        request = urllib.request.Request(  # noqa: S310 - the operator's own URL
            self._webhook,
            data=body,
            method="POST",
            headers={"content-type": "application/json", "x-engram-event-id": entry.event_id},
        )
        try:
            with urllib.request.urlopen(request, timeout=self._timeout_s) as response:  # noqa: S310
                status = int(response.status)
        except Exception as exc:
            return PutResult(entry.event_id, accepted=False, error=f"webhook: {exc}"[:300])
        if 200 <= status < 300:
            return PutResult(entry.event_id, accepted=True)
        return PutResult(entry.event_id, accepted=False, error=f"webhook answered {status}")
