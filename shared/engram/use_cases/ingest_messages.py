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

``store_batch`` groups a consumer batch by identity and writes all the groups with one
``RecordMany`` call: the consumer gives ``BehaviourService.record_many`` (one Redis pipeline
for the batch, one per shard on a cluster); ``one_call_each(record)`` is one call, so one round
trip, per identity. The messages of a group whose write failed are reported, the others are
done. Recording is idempotent by observation id, so a redelivered message adds nothing.
"""

from __future__ import annotations

import json
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any

from pydantic_core import to_json

from engram.behaviour.models import TRUSTED, Observation

#: The ``v`` of the message shape this module writes.
MESSAGE_VERSION = 2


def _dumps(value: Any) -> str:
    """Compact JSON of validated JSON values (pydantic-core's encoder: a few times faster than
    ``json.dumps`` on a request's observations; the same values decode from either)."""
    return to_json(value).decode("utf-8")


def _size(text: str) -> int:
    """A message's size: the UTF-8 bytes of its body (SQS counts the body and the message
    attributes; the ingest queue's messages carry none)."""
    return len(text.encode("utf-8", errors="surrogatepass"))


def observation_item(observation: Observation) -> dict[str, Any]:
    """An observation as a message carries it: camelCase JSON values, without the identity
    (the message names it once) and the store's ``seq``."""
    item: dict[str, Any] = observation.model_dump(
        mode="json", by_alias=True, exclude_none=True, exclude={"identity_id", "seq"}
    )
    return item


def encode_messages(
    identity_id: str, items: Sequence[Mapping[str, Any]], max_bytes: int
) -> list[str]:
    """The bodies that carry ``items`` (observations of ``identity_id`` as
    ``observation_item`` gives them, already validated) in one message when they fit in
    ``max_bytes``, else in consecutive chunks of at most ``max_bytes`` each (in order, each item
    in exactly one). Raises ``ValueError`` when one item alone does not fit (a configuration
    error: the limit is below what one valid observation may weigh)."""
    if not items:
        return []
    whole = _dumps({"v": MESSAGE_VERSION, "identityId": identity_id, "observations": items})
    if _size(whole) <= max_bytes:
        return [whole]  # the common case: one message, one encoding pass
    head = _dumps({"v": MESSAGE_VERSION, "identityId": identity_id, "observations": []})
    empty = _size(head)  # ends with "[]}"
    prefix = head[:-2]
    bodies: list[str] = []
    chunk: list[str] = []
    size = empty
    for item in map(_dumps, items):
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


#: Records several identities' observations: per identity, how many were new or the
#: exception its write raised (the others are written all the same).
RecordMany = Callable[[Mapping[str, Sequence[Observation]]], Mapping[str, int | BaseException]]


def one_call_each(record: Callable[[str, Sequence[Observation]], int]) -> RecordMany:
    """``RecordMany`` over ``record(identity_id, observations)`` (``BehaviourService.record``):
    one call, so one Redis round trip, per identity."""

    def record_many(groups: Mapping[str, Sequence[Observation]]) -> dict[str, int | BaseException]:
        out: dict[str, int | BaseException] = {}
        for identity, observations in groups.items():
            try:
                out[identity] = record(identity, observations)
            except Exception as exc:  # reported per identity: SQS redelivers only its messages
                out[identity] = exc
        return out

    return record_many


def store_batch(record_many: RecordMany, messages: Sequence[tuple[str, str]]) -> BatchOutcome:
    """Store the observations of ``messages`` (``(message_id, body)`` pairs) grouped by
    identity, each identity's with one write (see the module docstring).

    A message that cannot be decoded fails alone; when an identity's write fails, every message
    of that identity fails and the other identities are unaffected.
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
    if not groups:
        return outcome
    written = record_many({i: list(g.observations.values()) for i, g in groups.items()})
    for identity, group in groups.items():
        outcome.identities += 1
        result = written.get(identity)
        if isinstance(result, int):
            outcome.stored += result
            continue
        error = result or RuntimeError("the store returned nothing for this identity")
        for message_id in group.message_ids:
            outcome.failed[message_id] = error
    return outcome
