"""The Redis store by the names of its separate parts (the log, the facts, the checkpoint).

Each is the whole ``RedisBehaviourStore`` (or, for the checkpoint, a view of one), so parts
on one server and key prefix resolve to one store in ``engram.consolidate``.
"""

from __future__ import annotations

from typing import TypedDict, Unpack

from engram.adapters.redis_behaviour.store import RedisBehaviourStore
from engram.adapters.redis_client import RedisClient
from engram.behaviour.ports import CheckpointView
from engram.clock import Clock


class RedisObservationLog(RedisBehaviourStore):
    """The store, named for its observation log (``append``, ``since``, ``prune``)."""


class RedisFactRepository(RedisBehaviourStore):
    """The store, named for its facts (``get``, ``upsert``, ``upsert_batch``, ``delete``)."""


class StoreOptions(TypedDict, total=False):
    """The keyword options of ``RedisBehaviourStore``."""

    prefix: str
    ttl_days: int
    clock: Clock | None


class RedisCheckpointStore(CheckpointView):
    """The checkpoint (``get``, ``set``) of the store on ``client`` under ``prefix``. ``set``
    also drains, atomically, the pending counts of the observations the checkpoint now covers
    (else they would be consolidated again by a later round)."""

    store: RedisBehaviourStore

    def __init__(self, client: RedisClient, **options: Unpack[StoreOptions]) -> None:
        super().__init__(RedisBehaviourStore(client, **options))

    def behaviour_store(self) -> RedisBehaviourStore:
        return self.store

    @property
    def round_trips(self) -> int:
        return self.store.round_trips
