"""The Redis keys of one identity's behavioural memory.

Every key of one identity shares the hash tag ``{identityId}``, so the multi-key scripts and
transactions stay in one cluster slot; the identity index is the one key outside it.
"""

from __future__ import annotations

from typing import NamedTuple


class Keys(NamedTuple):
    """The keys of one identity, in the order the Lua scripts declare them (``KEYS[1]`` is
    ``state`` … ``KEYS[7]`` is ``pending``; ``stage`` only for the scripts that take eight)."""

    state: str  # hash: seq, cursor, version, active, gen, pmaxts
    obs: str  # sorted set: log members scored by arrival seq
    obsid: str  # hash: observation id -> seq (0 once pruned: the idempotency tombstone)
    obsts: str  # sorted set: live observation ids scored by createdAt
    obsgone: str  # sorted set: tombstoned ids scored by createdAt
    facts: str  # hash: fact id -> fact JSON
    pending: str  # hash: the pending aggregate (kind␟key -> count, l␟key -> label)
    stage: str  # hash: the new fact set of a staged commit (never outlives its transaction)

    @classmethod
    def of(cls, prefix: str, identity_id: str) -> Keys:
        tag = "{" + identity_id + "}"
        return cls(*(f"{prefix}:{name}:{tag}" for name in cls._fields))

    @property
    def log(self) -> tuple[str, ...]:
        """The seven keys the scripts built on the shared log functions take (no stage)."""
        return self[:7]


def index_key(prefix: str) -> str:
    """``P:identities``: identity ids scored by last activity (not per identity)."""
    return f"{prefix}:identities"
