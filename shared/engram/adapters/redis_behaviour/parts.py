"""The Redis store by the names of its separate parts (the log, the facts, the checkpoint).

Each is the whole ``RedisBehaviourStore`` (or, for the checkpoint, a view of one), so parts
on one server and key prefix resolve to one store in ``engram.consolidate``.
"""

from __future__ import annotations

from engram.adapters.redis_behaviour.store import RedisBehaviourStore
from engram.adapters.redis_client import RedisClient
from engram.clock import Clock


class RedisObservationLog(RedisBehaviourStore):
    """The store, named for its observation log (``append``, ``since``, ``prune``)."""


class RedisFactRepository(RedisBehaviourStore):
    """The store, named for its facts (``get``, ``upsert``, ``upsert_batch``, ``delete``)."""


class RedisCheckpointStore:
    """The checkpoint (``get``, ``set``) of the store on ``client`` under ``prefix``."""

    def __init__(
        self,
        client: RedisClient,
        *,
        prefix: str = "engram",
        ttl_days: int = 90,
        clock: Clock | None = None,
    ) -> None:
        self.store = RedisBehaviourStore(client, prefix=prefix, ttl_days=ttl_days, clock=clock)

    def get(self, identity_id: str) -> int | None:
        return self.store.get_checkpoint(identity_id)

    def set(self, identity_id: str, value: int) -> None:
        """Set the checkpoint and, atomically, drain the pending counts of the observations
        it now covers (else they would be consolidated again by a later round)."""
        self.store.set_checkpoint(identity_id, value)

    def behaviour_store(self) -> RedisBehaviourStore:
        return self.store

    @property
    def round_trips(self) -> int:
        return self.store.round_trips
