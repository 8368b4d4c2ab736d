"""Ingest: validate, assign ids and arrival data, queue — all or nothing for the caller.

* ``POST /v1/observations``: each observation gets an ``id`` and ``createdAt`` when absent. A
  client ``createdAt`` must lie within the retention window (``Settings
  .observation_retention_days``) and at most 5 minutes ahead, by server time; otherwise 422.
* ``POST /v1/events``: raw events become observations (server-side emission).
* ``POST /v1/conversations/{id}/transcript``: one ``TranscriptJob`` on the extraction queue,
  charged 1 to the rate limiter, after the persona is checked the way a memory save checks it
  (``MemoryCore.check_persona_access``, given as ``persona_access``).

Idempotency is for retries, not repeats. A *retry* is the same request again (a client that
got a 503, a 429 or no answer); a *repeat* is a new request that happens to look the same (the
same question asked in next week's session). Ids assigned here are deterministic per request,
and the consumer — idempotent by observation id — stores a retry's observations once, while a
repeat gets new ids and is stored as new observations:

* With an ``Idempotency-Key``, ids derive from (caller, route, key, the UTC day the key was
  first used, the body's digest). The same key within 24 hours of its first use is the same
  request: same ids, stored once. The same key with another body within those 24 hours is
  refused with 422 ``idempotency_key_reused`` and nothing is queued. After 24 hours the key is
  free again (a new day, so new ids). Keys are remembered by an ``IdempotencyKeys`` store
  (Redis in AWS); when it cannot answer, ingest fails open like the rate limiter: the ids come
  from the current UTC day and the other-body check is skipped for that request. Because the
  body's digest is in the ids, two different bodies under one key never share an id, so an
  outage cannot merge them into one (both are stored); a retry of the same body keeps its ids.
* Without one, ids derive from (caller, route, body, the retry-window bucket
  ``now // Settings.ingest_retry_window_s``). The same body within one bucket is the same
  request; anything else is new observations.

A retry that straddles a bucket boundary (a keyless retry across a window edge, a keyed one
during a store outage across midnight UTC) gets new ids, so its observations are stored a second
time. That is harmless: consolidation (at session start) reinforces a fact at most once per
round whatever the number of observations behind it, and a retry follows its original by
seconds, so both copies are consolidated in the same round.
An observation that carries its own ``id`` keeps it (the client owns that rule).

A request refused for its input (422) claims no key; validation runs first.

With a ``limiter`` (``Settings.observations_per_minute``), a request is admitted whole or
refused whole with 429 before anything is queued.

Every observation is validated here, before anything is queued (a bad one refuses the whole
request with 422). A request's observations then travel in one SQS message, or in consecutive
chunks when one message would exceed ``Settings.ingest_max_message_bytes``
(``engram.use_cases.ingest_messages``), all sent in one queue call when they fit in one batch.
"""

from __future__ import annotations

import hashlib
import json
import logging
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass
from typing import Any

import orjson
from pydantic import TypeAdapter, ValidationError

from engram import limits
from engram.behaviour.commands import QueryAsked, RecordEvents, RecordObservations, ToolRan
from engram.behaviour.emission import EmissionRules, observations_from_events
from engram.behaviour.models import Observation
from engram.clock import Clock, SystemClock
from engram.errors import IdempotencyKeyReused, InvalidInput, Unavailable
from engram.extraction.commands import QueueTranscript
from engram.extraction.models import TranscriptJob
from engram.fields import Identifier
from engram.identity import Caller
from engram.use_cases.ingest_messages import encode_messages, observation_item
from engram.use_cases.ports import IdempotencyKeys, Limiter, MessageQueue

log = logging.getLogger(__name__)

MAX_CLOCK_SKEW_MS = 5 * 60_000  # a client createdAt may run at most this far ahead
DAY_MS = 86_400_000
KEY_LIFETIME_MS = DAY_MS  # an Idempotency-Key names one request for 24 hours after first use


@dataclass(frozen=True)
class Accepted:
    ids: list[str]

    @property
    def accepted(self) -> int:
        return len(self.ids)


def _canonical(value: Any) -> bytes:
    """``value`` as JSON with sorted keys, compact: orjson (several times faster than
    ``json.dumps`` on a request's observations), or ``json.dumps`` for what orjson refuses
    (integers beyond 64 bits): one encoding per value, whichever applies."""
    try:
        return orjson.dumps(value, option=orjson.OPT_SORT_KEYS)
    except orjson.JSONEncodeError:
        raw = json.dumps(value, sort_keys=True, ensure_ascii=False, separators=(",", ":"))
        return raw.encode("utf-8", errors="surrogatepass")


def body_digest(body: Any) -> str:
    """SHA-256 (hex) of a request body as validated: key order and spacing do not count."""
    return hashlib.sha256(_canonical(body)).hexdigest()


_KEY: TypeAdapter[str] = TypeAdapter(Identifier)


def _valid_key(value: str) -> str:
    """An ``Idempotency-Key`` is an id the client sends: the id rule (``engram.fields``)."""
    try:
        return _KEY.validate_python(value, strict=True)
    except ValidationError as exc:
        raise InvalidInput("Idempotency-Key", str(exc.errors()[0]["msg"])) from None


def _derived_ids(batch: str, count: int) -> list[str]:
    """``count`` ids of 32 hex digits from one SHAKE-256 stream over ``batch``: the id at an
    index is the same whatever the count (one hash call for a whole request)."""
    stream = hashlib.shake_256(batch.encode()).hexdigest(16 * count)
    return [stream[i : i + 32] for i in range(0, 32 * count, 32)]


def _event_body(event: QueryAsked | ToolRan) -> dict[str, Any]:
    """An event as its request body gave it (camelCase, no ``null`` members): what the ids of
    a request derive from."""
    if isinstance(event, QueryAsked):
        return {"kind": "query", "text": event.text}
    body: dict[str, Any] = {
        "kind": "tool",
        "toolName": event.tool_name,
        "ok": event.ok,
        "durationMs": event.duration_ms,
    }
    if event.error is not None:
        body["error"] = event.error
    if event.result is not None:
        body["result"] = event.result
    return body


class IngestService:
    def __init__(
        self,
        queue: MessageQueue | None,
        *,
        observation_retention_days: int,
        retry_window_s: int,
        extraction_queue: MessageQueue | None = None,
        rules: EmissionRules | None = None,
        clock: Clock | None = None,
        limiter: Limiter | None = None,
        keys: IdempotencyKeys | None = None,
        persona_access: Callable[[Caller, str], None] | None = None,
        max_message_bytes: int = limits.DEFAULT_QUEUE_MESSAGE_BYTES,
    ) -> None:
        """``persona_access(caller, persona_id)`` raises what a memory save with that persona
        would (``MemoryCore.check_persona_access``); a transcript naming a persona is
        checked by it before anything is charged or queued.

        ``observation_retention_days``, ``retry_window_s`` and ``max_message_bytes`` are
        ``Settings.observation_retention_days``, ``Settings.ingest_retry_window_s`` and
        ``Settings.ingest_max_message_bytes`` (the ingest queue's largest message).
        Without ``keys`` a key is not remembered: its ids come from the current UTC day and
        another body under the same key is not detected (the container always gives one).
        """
        if observation_retention_days < 1:
            raise InvalidInput("observationRetentionDays", "must be at least 1")
        if retry_window_s < 1:
            raise InvalidInput("ingestRetryWindowS", "must be at least 1")
        if max_message_bytes < 1024:
            raise InvalidInput("ingestMaxMessageBytes", "must be at least 1024")
        self.max_message_bytes = max_message_bytes
        self.queue = queue
        self.limiter = limiter
        self.keys = keys
        self.persona_access = persona_access
        self.retry_window_ms = retry_window_s * 1000
        self.retention_ms = observation_retention_days * DAY_MS
        self.extraction_queue = extraction_queue
        self.rules = rules or EmissionRules()
        self.clock = clock or SystemClock()

    def _send(self, queue: MessageQueue | None, bodies: Sequence[str], what: str) -> None:
        if queue is None:
            raise Unavailable(f"no {what} queue is configured")
        queue.send(bodies)

    def _queue(self, caller: Caller, observations: Sequence[Observation]) -> Accepted:
        return self._queue_items(caller, [observation_item(o) for o in observations])

    def _queue_items(self, caller: Caller, items: Sequence[Mapping[str, Any]]) -> Accepted:
        """Queue observations of ``caller`` (as ``observation_item`` gives them), all or none."""
        if self.limiter is not None and items:
            self.limiter.check(caller.identity_id, cost=len(items))
        bodies = encode_messages(caller.identity_id, items, self.max_message_bytes)
        if bodies:
            self._send(self.queue, bodies, "ingest")
        return Accepted(ids=[str(item["id"]) for item in items])

    def _batch_id(
        self, caller: Caller, route: str, body: Any, idempotency_key: str | None, now: int
    ) -> str:
        """The id of one logical request (see the module docstring); raises 422
        ``idempotency_key_reused`` when the key names another body."""
        if idempotency_key is None:
            material: Any = ["body", caller.identity_id, route, body, now // self.retry_window_ms]
        else:
            key = _valid_key(idempotency_key)
            digest = body_digest(body)
            since = self._claim(json.dumps([caller.identity_id, route, key]), digest, now)
            # a day bucket no longer than a key's lifetime: two claims of one key (at least a
            # lifetime apart) never share a bucket, so a freed key always gets new ids; the
            # body's digest is part of the ids, so two bodies never share ids even when the
            # key store could not refuse the second (a retry sends the same body: same ids)
            day = since // KEY_LIFETIME_MS
            material = ["key", caller.identity_id, route, key, day, digest]
        return hashlib.sha256(_canonical(material)).hexdigest()[:32]

    def _claim(self, scope: str, digest: str, now: int) -> int:
        """When the key was first used; refuses another body (``digest``) under a live key."""
        if self.keys is None:
            return now
        try:
            claim = self.keys.claim(scope, digest, now_ms=now, ttl_ms=KEY_LIFETIME_MS)
        except Unavailable:
            log.warning("idempotency key store unavailable; key not checked (fail open)")
            return now
        if claim.digest != digest:
            raise IdempotencyKeyReused(
                "was used less than 24 hours ago for a request with another body; "
                "send a new key for a new request"
            )
        return claim.first_ms

    def accept_observations(
        self,
        caller: Caller,
        command: RecordObservations,
        *,
        idempotency_key: str | None = None,
    ) -> Accepted:
        items = command.items
        now = self.clock.now_ms()
        for index, item in enumerate(items):
            created = item.get("createdAt")
            if created is not None:
                self._check_created_at(index, created, now)
        batch = self._batch_id(caller, "observations", items, idempotency_key, now)
        # the edge checked every field of every item (metadata per type included); what is
        # added here is valid by construction (a derived hex id, the arrival time), to copies:
        # the command stays as given, so the same command retried is the same request
        queued: list[dict[str, Any]] = []
        for item, derived in zip(items, _derived_ids(batch, len(items)), strict=True):
            copy = dict(item)
            copy.setdefault("id", derived)
            copy.setdefault("createdAt", now)
            queued.append(copy)
        return self._queue_items(caller, queued)

    def _check_created_at(self, index: int, created: int, now: int) -> None:
        field = f"observations.{index}.createdAt"
        if created < now - self.retention_ms:
            days = self.retention_ms // DAY_MS
            raise InvalidInput(field, f"is older than the {days}-day retention window")
        if created > now + MAX_CLOCK_SKEW_MS:
            raise InvalidInput(field, "is more than 5 minutes in the future")

    def accept_events(
        self, caller: Caller, command: RecordEvents, *, idempotency_key: str | None = None
    ) -> Accepted:
        raw = [_event_body(e) for e in command.events]
        now = self.clock.now_ms()
        batch = self._batch_id(caller, "events", raw, idempotency_key, now)
        observations = observations_from_events(
            caller.identity_id, command.events, now_ms=now, rules=self.rules, batch_id=batch
        )
        return self._queue(caller, observations)

    def queue_transcript(self, caller: Caller, command: QueueTranscript) -> TranscriptJob:
        """Queue one transcript for extraction; the limiter charges 1 (429 queues nothing).

        A transcript naming a persona is refused first (403 / memory disabled) when a memory
        save with that persona would be.
        """
        if command.persona_id is not None:
            if self.persona_access is None:
                raise Unavailable("no persona check: a transcript naming a persona is refused")
            self.persona_access(caller, command.persona_id)
        if self.limiter is not None:
            self.limiter.check(caller.identity_id, cost=1)
        job = TranscriptJob.new(
            conversation_id=command.conversation_id,
            team_id=caller.team_id,
            user_id=caller.user_id,
            persona_id=command.persona_id,
            messages=command.messages,
            queued_at=self.clock.now_ms(),
        )
        self._send(self.extraction_queue, [job.to_json()], "extraction")
        return job
