"""The byte-level codec of stored facts (``P:facts:{id}`` values).

A fact is stored as the same camelCase JSON object ``Fact.to_storage_json`` writes, with the
six fields a reinforcement changes first (the *head*) and the fields that never change after
creation last (the *tail*). A round that rewrites a fact it read re-encodes only the head and
reuses the stored bytes of the tail; a fact in any other layout (written before this codec)
is re-encoded in full.
"""

from __future__ import annotations

import json
from collections.abc import Sequence
from typing import Any

from pydantic import TypeAdapter

from engram.behaviour.models import Fact

_FACTS_ADAPTER: TypeAdapter[list[Fact]] = TypeAdapter(list[Fact])


def parse_facts(rows: Sequence[Any]) -> list[Fact]:
    """Parse many fact JSON documents in one validator call."""
    if not rows:
        return []
    try:
        blob = b",".join(rows)
    except TypeError:  # a client decoding responses gives str
        blob = b",".join(r if isinstance(r, bytes) else str(r).encode() for r in rows)
    return _FACTS_ADAPTER.validate_json(b"[" + blob + b"]")


_FACT_HEAD = b'{"confidence":'
_TAIL_START = b',"createdAt":'
_dumps = json.JSONEncoder(ensure_ascii=False, allow_nan=False, separators=(",", ":")).encode


def _fact_head(d: dict[str, Any]) -> str:
    """The mutable fields of a stored fact, in a fixed order, up to (not including) the comma
    before the unchanging ones. The three a round sets to the same values for every fact it
    reinforces come last (``HeadEncoder`` formats them once per round)."""
    ease = d["ease_factor"]
    cursor = d["round_cursor"]
    return (
        f'{{"confidence":{d["confidence"]!r},"reinforcementCount":{d["reinforcement_count"]},'
        f'"easeFactor":{"null" if ease is None else repr(ease)},'
        f'"lastReinforcedAt":{d["last_reinforced_at"]},"updatedAt":{d["updated_at"]},'
        f'"roundCursor":{"null" if cursor is None else cursor}'
    )


class HeadEncoder:
    """``_fact_head`` for many facts of one round, as bytes: the (lastReinforcedAt,
    updatedAt, roundCursor) suffix and the confidence texts are formatted once per distinct
    value (a round gives every fact it reinforces the same three)."""

    __slots__ = ("_confidence", "_suffix")

    def __init__(self) -> None:
        self._suffix: dict[tuple[int, int, int | None], str] = {}
        self._confidence: dict[float, str] = {}

    def __call__(self, d: dict[str, Any]) -> bytes:
        key = (d["last_reinforced_at"], d["updated_at"], d["round_cursor"])
        suffix = self._suffix.get(key)
        if suffix is None:
            cursor = "null" if key[2] is None else str(key[2])
            suffix = f',"lastReinforcedAt":{key[0]},"updatedAt":{key[1]},"roundCursor":{cursor}'
            self._suffix[key] = suffix
        value = d["confidence"]
        confidence = self._confidence.get(value)
        if confidence is None:
            confidence = self._confidence[value] = repr(value)
        ease = d["ease_factor"]
        return (
            f'{{"confidence":{confidence},"reinforcementCount":{d["reinforcement_count"]},'
            f'"easeFactor":{"null" if ease is None else repr(ease)}{suffix}'
        ).encode()


def _fact_tail(d: dict[str, Any]) -> str:
    """The fields of a stored fact that never change after it is created."""
    return (
        f'"createdAt":{d["created_at"]},"id":{_dumps(d["id"])},'
        f'"identityId":{_dumps(d["identity_id"])},"category":"{d["category"]}",'
        f'"subject":{_dumps(d["subject"])},"content":{_dumps(d["content"])}}}'
    )


def encode_fact(fact: Fact) -> bytes:
    """The stored JSON of a fact: the same camelCase object as ``Fact.to_storage_json`` (and
    read the same way), with the six fields a reinforcement changes first, ``easeFactor``
    and ``roundCursor`` always present (``null`` when unset) — so a round rewriting a fact
    it read re-encodes only those and reuses the stored bytes of the rest."""
    d = fact.__dict__
    return (_fact_head(d) + "," + _fact_tail(d)).encode()


def stored_tail(row: bytes) -> bytes | None:
    """The unchanging part of a stored fact written by ``encode_fact`` (None for any other
    layout, e.g. facts written before it: those are re-encoded in full)."""
    if not row.startswith(_FACT_HEAD):
        return None
    at = row.find(_TAIL_START)  # the head holds numbers only: the first match is the border
    return row[at + 1 :] if at > 0 else None


def _reencode(read_fact: Fact, row: bytes, fact: Fact) -> bytes:
    """The stored JSON of ``fact``, a change of ``read_fact`` (stored as ``row``): only the
    head is encoded when the unchanging fields are the same (always for a fact reinforced
    in place)."""
    tail = stored_tail(row)
    if tail is not None and (read_fact is fact or _same_tail(read_fact.__dict__, fact.__dict__)):
        return _fact_head(fact.__dict__).encode() + b"," + tail
    return encode_fact(fact)


def new_fact_set(
    read_facts: Sequence[Fact],
    rows: Sequence[bytes],
    upserts: Sequence[Fact],
    deletes: Sequence[str],
) -> list[Any]:
    """Flat (id, JSON) pairs of the fact set after the round: the read facts as stored (bytes
    reused, not re-encoded) with the upserts applied and the deletes left out. The hot loop
    of a large round: ``_reencode`` inlined."""
    changed = {f.__dict__["id"]: f for f in upserts}
    deleted = set(deletes)
    out: list[Any] = []
    append = out.append
    pop = changed.pop
    head_start, tail_start = _FACT_HEAD, _TAIL_START
    head = HeadEncoder()
    for read_fact, row in zip(read_facts, rows, strict=True):
        d = read_fact.__dict__
        fid = d["id"]
        fact = pop(fid, None)
        if deleted and fid in deleted:
            continue
        append(fid)
        if fact is None:
            append(row)
            continue
        at = row.find(tail_start) if row.startswith(head_start) else -1
        if at > 0 and (fact is read_fact or _same_tail(d, fact.__dict__)):
            append(head(fact.__dict__) + row[at:])
        else:
            append(encode_fact(fact))
    for fid, fact in changed.items():
        if fid not in deleted:
            append(fid)
            append(encode_fact(fact))
    return out


def encode_upserts(
    upserts: Sequence[Fact], read_facts: Sequence[Fact], rows: Sequence[bytes]
) -> list[Any]:
    """(id, stored JSON) pairs of the upserts (see ``_reencode``)."""
    out: list[Any] = []
    if not upserts:
        return out
    read_by_id = (
        {f.__dict__["id"]: (f, row) for f, row in zip(read_facts, rows, strict=True)}
        if len(rows) == len(read_facts)
        else {}
    )
    for fact in upserts:
        fid = fact.__dict__["id"]
        seen = read_by_id.get(fid)
        out.append(fid)
        out.append(encode_fact(fact) if seen is None else _reencode(seen[0], seen[1], fact))
    return out


def _same_tail(a: dict[str, Any], b: dict[str, Any]) -> bool:
    return bool(
        a["created_at"] == b["created_at"]
        and a["identity_id"] == b["identity_id"]
        and a["category"] == b["category"]
        and a["subject"] == b["subject"]
        and a["content"] == b["content"]
    )
