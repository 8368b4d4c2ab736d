"""The codec of the observation log and its pending aggregate.

A log member is ``kind␟key␟label␟createdAt\n<json>``: a header the Lua scripts group by
without decoding JSON (key fields are validated free of control characters), then the
observation JSON; ``kind`` is the kind's letter and ``key`` its log key in the table of
observation kinds (``engram.behaviour.kinds``). The pending aggregate (``P:pending:{id}``)
holds ``kind␟key`` → count and ``l␟key`` → label (for the kinds that store one);
``decode_pending`` turns it into the key groups of a round.
"""

from __future__ import annotations

from itertools import chain
from typing import Any

from engram.behaviour.kinds import KINDS, Derived
from engram.behaviour.models import Observation
from engram.behaviour.ports import KeyGroup, groups_of


def as_text(value: Any) -> str:
    """A Redis reply as text (clients may or may not decode responses)."""
    return value.decode() if isinstance(value, bytes) else str(value)


_SEP = "\x1f"


#: every control character (C0 and DEL) as a space: a label never breaks the header
_CONTROLS_AS_SPACES = dict.fromkeys((*range(32), 127), " ")


def _label(text: str) -> str:
    return text.translate(_CONTROLS_AS_SPACES)[:200]


def encode_member(obs: Observation) -> str:
    """``kind␟key␟label␟createdAt\\n<json>``: a header the read script groups by without
    decoding JSON (key fields are validated free of control characters), then the JSON. The
    kind is its table letter, the key its ``log_key``."""
    kind = KINDS[obs.type]
    md = obs.metadata
    header = _SEP.join(
        (kind.letter, kind.log_key(md), _label(kind.label_of(md)), str(obs.created_at))
    )
    return f"{header}\n{obs.to_storage_json()}"


def labelled_letters() -> str:
    """The letters whose label the append script stores (``l␟key``): the kinds whose label is
    not their last key field (the script's ``ARGV[4]``)."""
    return Derived.now.labelled_letters


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
    labels: dict[str, str] = {}
    counts: list[tuple[str, str, int, int]] = []
    total = 0
    for raw_field, raw_value in pairs.items():
        field = raw_field.decode()
        if field[0] == "l":
            labels[field[2:]] = raw_value.decode()
            continue
        count = int(raw_value)
        if count > 0:
            total += count
            counts.append((field[0], field[2:], count, max_seq))
    pending = b"\x1e".join(chain.from_iterable(pairs.items())) + b"\x1e" if pairs else b""
    return groups_of(counts, labels), total, pending
