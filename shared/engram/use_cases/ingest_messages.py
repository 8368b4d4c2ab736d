"""The ingest queue's messages: what the ingest function sends and the consumer stores.

One message carries the observations of one request for one identity (version 2)::

    {"v": 2, "identityId": "acme:alice", "observations": [{"id": ..., "type": ...,
     "content": ..., "metadata": {...}, "createdAt": ...}, ...]}

The identity is written once; each observation keeps its deterministic ``id``. A request whose
message would be larger than the queue's maximum message size (``Settings
.ingest_max_message_bytes``) is split into several messages (chunks), each at most that size and
each consumed on its own: together they carry exactly the request's observations, each once.

The consumer also accepts the shape sent before version 2 — one ``Observation`` (camelCase
JSON, with its ``identityId``) per message — for as long as such a message can still be
delivered (docs/operations.md, "Ingest at scale": until the queue's and its dead-letter queue's
retention have passed since the ingest function stopped sending it).

``store_batch`` groups a consumer batch by identity and records each group with one call
(``BehaviourService.record``: one Redis round trip for one identity), so a batch costs one
round trip per distinct identity; the messages of a group whose write failed are reported, the
others are done. Recording is idempotent by observation id, so a redelivered message adds
nothing.
"""

from __future__ import annotations

import json
from collections.abc import Callable, Sequence
from dataclasses import dataclass, field
from typing import Any

from engram.behaviour.models import TRUSTED, Observation

#: The ``v`` of the message shape this module writes.
MESSAGE_VERSION = 2


def _dumps(value: Any) -> str:
    return json.dumps(value, ensure_ascii=False, separators=(",", ":"))


def _size(text: str) -> int:
    """A message's size: the UTF-8 bytes of its body (SQS counts the body and the message
    attributes; the ingest queue's messages carry none)."""
    return len(text.encode("utf-8", errors="surrogatepass"))


def encode_messages(
    identity_id: str, observations: Sequence[Observation], max_bytes: int
) -> list[str]:
    """The bodies that carry ``observations`` of ``identity_id``: one when they fit in
    ``max_bytes``, else consecutive chunks, each at most ``max_bytes`` (in order, each
    observation in exactly one). Raises ``ValueError`` when one observation alone does not fit
    (a configuration error: the limit is below what one valid observation may weigh)."""
    if not observations:
        return []
    head = _dumps({"v": MESSAGE_VERSION, "identityId": identity_id, "observations": []})
    empty = _size(head)  # ends with "[]}"
    prefix = head[:-2]
    items = [
        o.model_dump_json(by_alias=True, exclude_none=True, exclude={"identity_id", "seq"})
        for o in observations
    ]
    bodies: list[str] = []
    chunk: list[str] = []
    size = empty
    for item in items:
        weight = _size(item) + (1 if chunk else 0)  # the comma before it
        if chunk and size + weight > max_bytes:
            bodies.append(prefix + ",".join(chunk) + "]}")
            chunk, size = [], empty
            weight -= 1
        if empty + _size(item) > max_bytes:
            raise ValueError(
                f"one observation does not fit in a message of {max_bytes} bytes; "
                "raise the queue's maximum message size"
            )
        chunk.append(item)
        size += weight
    bodies.append(prefix + ",".join(chunk) + "]}")
    return bodies


def decode_message(body: str) -> tuple[str, list[Observation]]:
    """The identity and the observations one message carries, in either shape (see the
    module docstring). Raises ``ValueError`` (pydantic's ``ValidationError`` included) or
    ``TypeError`` for a body that is neither."""
    data = json.loads(body)
    if not isinstance(data, dict):
        raise ValueError("an ingest message is a JSON object")
    if "v" not in data:  # before version 2: one observation, checked in full as then
        observation = Observation.model_validate(data)
        return observation.identity_id, [observation]
    if data["v"] != MESSAGE_VERSION:
        raise ValueError(f"unknown ingest message version {data['v']!r}")
    identity = data.get("identityId")
    items = data.get("observations")
    if not isinstance(identity, str) or not identity or not isinstance(items, list):
        raise ValueError("an ingest message names its identityId and lists its observations")
    # ingest validated every observation (metadata included) before sending it, and only the
    # ingest function may send to the queue: the shape is checked here, the metadata rule not
    # again
    observations = [
        Observation.model_validate({**item, "identityId": identity}, context=TRUSTED)
        for item in items
    ]
    return identity, observations


@dataclass
class BatchOutcome:
    """What ``store_batch`` did: new observations stored, identities written (one store call
    each) and the messages that failed, with why."""

    stored: int = 0
    identities: int = 0
    failed: dict[str, BaseException] = field(default_factory=dict)


@dataclass
class _Group:
    message_ids: list[str] = field(default_factory=list)
    observations: dict[str, Observation] = field(default_factory=dict)  # by id: once each


def store_batch(
    record: Callable[[str, Sequence[Observation]], int],
    messages: Sequence[tuple[str, str]],
) -> BatchOutcome:
    """Store the observations of ``messages`` (``(message_id, body)`` pairs) with one
    ``record(identity_id, observations)`` call per identity (see the module docstring).

    A message that cannot be decoded fails alone; when ``record`` raises for an identity, every
    message of that identity fails and the other identities are unaffected.
    """
    outcome = BatchOutcome()
    groups: dict[str, _Group] = {}
    for message_id, body in messages:
        try:
            identity, observations = decode_message(body)
        except (ValueError, TypeError) as exc:
            outcome.failed[message_id] = exc
            continue
        group = groups.setdefault(identity, _Group())
        group.message_ids.append(message_id)
        for observation in observations:
            group.observations.setdefault(observation.id, observation)
    for identity, group in groups.items():
        outcome.identities += 1
        try:
            outcome.stored += record(identity, list(group.observations.values()))
        except Exception as exc:  # reported per message: SQS redelivers only these
            for message_id in group.message_ids:
                outcome.failed[message_id] = exc
    return outcome
