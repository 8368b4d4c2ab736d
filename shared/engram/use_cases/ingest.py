"""Ingest: validate, assign ids and arrival data, queue — all or nothing for the caller.

* ``POST /v1/observations``: each observation gets an ``id`` and ``createdAt`` when absent. A
  client ``createdAt`` must lie within the retention window (``Settings
  .observation_retention_days``) and at most 5 minutes ahead, by server time; otherwise 422.
* ``POST /v1/events``: raw events become observations (server-side emission).
* ``POST /v1/conversations/{id}/transcript``: one ``TranscriptJob`` on the extraction queue,
  charged 1 to the rate limiter. The ingest handler first checks the persona the way a memory
  save does (``MemoryService.check_persona_access``).

Ids assigned here are deterministic: derived from the ``Idempotency-Key`` the client sent or,
without one, from a digest of the caller and the request body. A client that retries after a
503 (or a lost 202) therefore sends the same observation ids, and the consumer — idempotent by
observation id — stores each exactly once. (Two byte-identical bodies from the same user
without an ``Idempotency-Key`` are treated as one request.)

With a ``limiter`` (``Settings.observations_per_minute``), a request is admitted whole or
refused whole with 429 before anything is queued.

One SQS message carries one observation (camelCase JSON of ``engram.behaviour.models
.Observation``), so the consumer can fail and retry records one by one.
"""

from __future__ import annotations

import hashlib
import json
from collections.abc import Sequence
from dataclasses import dataclass
from typing import Any

from engram.api.models import EventsRequest, ObservationsRequest, TranscriptRequest
from engram.behaviour.emission import EmissionRules, QueryEvent, ToolEvent, observations_from_events
from engram.behaviour.models import Observation, parse_observations
from engram.clock import Clock, SystemClock
from engram.errors import InvalidInput, Unavailable
from engram.extraction.models import TranscriptJob
from engram.identity import Caller
from engram.use_cases.ports import Limiter, MessageQueue

MAX_IDEMPOTENCY_KEY_CHARS = 128
MAX_CLOCK_SKEW_MS = 5 * 60_000  # a client createdAt may run at most this far ahead
DAY_MS = 86_400_000


@dataclass(frozen=True)
class Accepted:
    ids: list[str]

    @property
    def accepted(self) -> int:
        return len(self.ids)


def batch_id(caller: Caller, route: str, body: Any, idempotency_key: str | None) -> str:
    """A stable id for one logical request (see the module docstring)."""
    if idempotency_key is not None:
        key = idempotency_key.strip()
        if not key or len(key) > MAX_IDEMPOTENCY_KEY_CHARS or not key.isprintable():
            raise InvalidInput(
                "Idempotency-Key", f"must be 1-{MAX_IDEMPOTENCY_KEY_CHARS} printable characters"
            )
        material: Any = ["key", caller.identity_id, route, key]
    else:
        material = ["body", caller.identity_id, route, body]
    raw = json.dumps(material, sort_keys=True, ensure_ascii=False, separators=(",", ":"))
    return hashlib.sha256(raw.encode("utf-8", errors="surrogatepass")).hexdigest()[:32]


def _derived_id(batch: str, index: int) -> str:
    return hashlib.sha256(f"{batch}:{index}".encode()).hexdigest()[:32]


class IngestService:
    def __init__(
        self,
        queue: MessageQueue | None,
        *,
        extraction_queue: MessageQueue | None = None,
        rules: EmissionRules | None = None,
        clock: Clock | None = None,
        limiter: Limiter | None = None,
        observation_retention_days: int | None = None,
    ) -> None:
        if observation_retention_days is None:
            from engram.settings import get_settings

            observation_retention_days = get_settings().observation_retention_days
        if observation_retention_days < 1:
            raise InvalidInput("observationRetentionDays", "must be at least 1")
        self.queue = queue
        self.limiter = limiter
        self.retention_ms = observation_retention_days * DAY_MS
        self.extraction_queue = extraction_queue
        self.rules = rules or EmissionRules()
        self.clock = clock or SystemClock()

    def _send(self, queue: MessageQueue | None, bodies: Sequence[str], what: str) -> None:
        if queue is None:
            raise Unavailable(f"no {what} queue is configured")
        queue.send(bodies)

    def _queue(self, caller: Caller, observations: Sequence[Observation]) -> Accepted:
        if self.limiter is not None and observations:
            self.limiter.check(caller.identity_id, cost=len(observations))
        bodies = [o.model_dump_json(by_alias=True, exclude_none=True) for o in observations]
        if bodies:
            self._send(self.queue, bodies, "ingest")
        return Accepted(ids=[o.id for o in observations])

    def accept_observations(
        self, caller: Caller, request: ObservationsRequest, *, idempotency_key: str | None = None
    ) -> Accepted:
        items = [o.model_dump(by_alias=True, exclude_none=True) for o in request.observations]
        batch = batch_id(caller, "observations", items, idempotency_key)
        now = self.clock.now_ms()
        for index, item in enumerate(items):
            created = item.get("createdAt")
            if created is not None:
                self._check_created_at(index, created, now)
            item.setdefault("id", _derived_id(batch, index))
            item.setdefault("createdAt", now)
        observations = parse_observations(items, identity_id=caller.identity_id)
        return self._queue(caller, observations)

    def _check_created_at(self, index: int, created: int, now: int) -> None:
        field = f"observations.{index}.createdAt"
        if created < now - self.retention_ms:
            days = self.retention_ms // DAY_MS
            raise InvalidInput(field, f"is older than the {days}-day retention window")
        if created > now + MAX_CLOCK_SKEW_MS:
            raise InvalidInput(field, "is more than 5 minutes in the future")

    def accept_events(
        self, caller: Caller, request: EventsRequest, *, idempotency_key: str | None = None
    ) -> Accepted:
        raw = [e.model_dump(by_alias=True, exclude_none=True) for e in request.events]
        batch = batch_id(caller, "events", raw, idempotency_key)
        events: list[QueryEvent | ToolEvent] = [
            QueryEvent.model_validate(e) if e["kind"] == "query" else ToolEvent.model_validate(e)
            for e in raw
        ]
        observations = observations_from_events(
            caller.identity_id, events, now_ms=self.clock.now_ms(), rules=self.rules, batch_id=batch
        )
        return self._queue(caller, observations)

    def queue_transcript(
        self, caller: Caller, conversation_id: str, request: TranscriptRequest
    ) -> TranscriptJob:
        """Queue one transcript for extraction; the limiter charges 1 (429 queues nothing).

        The caller's right to the persona is checked before this (see the module docstring).
        """
        if self.limiter is not None:
            self.limiter.check(caller.identity_id, cost=1)
        job = TranscriptJob.new(
            conversation_id=conversation_id,
            team_id=caller.team_id,
            user_id=caller.user_id,
            persona_id=request.persona_id,
            messages=[m.model_dump(by_alias=True, exclude_none=True) for m in request.messages],
            queued_at=self.clock.now_ms(),
        )
        self._send(self.extraction_queue, [job.to_json()], "extraction")
        return job
