"""The codec of the observation log and its pending aggregate.

A log member is ``kind␟key␟label␟createdAt\n<json>``: a header the Lua scripts group by
without decoding JSON (key fields are validated free of control characters), then the
observation JSON. The pending aggregate (``P:pending:{id}``) holds ``kind␟key`` → count and
``l␟key`` → label; ``decode_pending`` turns it into the key groups of a round.
"""

from __future__ import annotations

from itertools import chain
from typing import Any

from engram.behaviour.models import (
    FactCategory,
    Observation,
    ObservationType,
    observation_to_fact_key,
)
from engram.behaviour.ports import KeyGroup


def as_text(value: Any) -> str:
    """A Redis reply as text (clients may or may not decode responses)."""
    return value.decode() if isinstance(value, bytes) else str(value)


_SEP = "\x1f"
_KIND = {
    ObservationType.TOOL_SUCCESS: "s",
    ObservationType.TOOL_FAILURE: "f",
    ObservationType.ENTITY_ACCESS: "e",
    ObservationType.QUERY_PATTERN: "d",
}


def _label(text: str) -> str:
    return "".join(" " if ord(ch) < 32 or ord(ch) == 127 else ch for ch in text)[:200]


def encode_member(obs: Observation) -> str:
    """``kind␟key␟label␟createdAt\\n<json>``: a header the read script groups by without
    decoding JSON (key fields are validated free of control characters), then the JSON."""
    md = obs.metadata
    if obs.type in (ObservationType.TOOL_SUCCESS, ObservationType.TOOL_FAILURE):
        key = label = str(md["toolName"])
    else:
        _, key = observation_to_fact_key(obs)
        if obs.type is ObservationType.ENTITY_ACCESS:
            label = str(md.get("entityName") or md["entityId"])
        else:
            label = str(md["domain"])
    header = _SEP.join((_KIND[obs.type], key, _label(label), str(obs.created_at)))
    return f"{header}\n{obs.to_storage_json()}"


def decode_member(member: bytes | str) -> str:
    """The observation JSON of a stored member."""
    text = as_text(member)
    return text.split("\n", 1)[1]


def decode_pending(pairs: dict[Any, Any], max_seq: int) -> tuple[list[KeyGroup], int, bytes]:
    """Key groups from the pending aggregate (``kind␟key`` → count, ``l␟key`` → label), the
    number of pending observations, and the aggregate as the commit sends it back
    (``field␞value␞`` repeated; the script skips the labels)."""
    if pairs and type(next(iter(pairs))) is not bytes:  # a client decoding responses
        pairs = {str(k).encode(): str(v).encode() for k, v in pairs.items()}
    tools: dict[str, list[int]] = {}
    labels: dict[str, str] = {}
    groups: list[KeyGroup] = []
    entities: list[tuple[str, int]] = []
    append = groups.append
    make = KeyGroup._make
    total = 0
    for raw_field, raw_value in pairs.items():
        field = raw_field.decode()
        kind = field[0]
        if kind == "l":
            labels[field[2:]] = raw_value.decode()
            continue
        count = int(raw_value)
        if count <= 0:
            continue
        total += count
        if kind == "s":
            tool = tools.get(field[2:])
            if tool is None:
                tools[field[2:]] = [count, 0]
            else:
                tool[0] += count
        elif kind == "f":
            tool = tools.get(field[2:])
            if tool is None:
                tools[field[2:]] = [0, count]
            else:
                tool[1] += count
        elif kind == "d":
            key = field[2:]
            label = key[key.index(":") + 1 :]
            append(make((FactCategory.DOMAIN_PREFERENCE, key, label, count, 0, 0, max_seq)))
        elif kind == "e":
            entities.append((field[2:], count))
    for key, count in entities:
        label = labels.get(key) or key.split(":", 2)[-1]
        append(make((FactCategory.ENTITY_FREQUENCY, key, label, count, 0, 0, max_seq)))
    affinity, avoidance = FactCategory.TOOL_AFFINITY, FactCategory.TOOL_AVOIDANCE
    for tool_name, (succ, fail) in tools.items():
        if succ:
            subject = "tool_affinity:" + tool_name
            append(make((affinity, subject, tool_name, succ, succ, fail, max_seq)))
        if fail:
            subject = "tool_avoidance:" + tool_name
            append(make((avoidance, subject, tool_name, fail, succ, fail, max_seq)))
    pending = b"\x1e".join(chain.from_iterable(pairs.items())) + b"\x1e" if pairs else b""
    return groups, total, pending
