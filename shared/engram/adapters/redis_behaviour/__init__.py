"""Behavioural memory on Redis (see ``store`` for the key layout and the commit protocol).

``store`` holds the store, ``parts`` its separate parts by name, ``scripts`` the Lua
(``lua/*.lua``) and its runner, ``keys`` the per-identity keys, ``index`` the identity index
pages, ``codec`` the stored fact bytes and ``log_codec`` the log members and the pending
aggregate.
"""

from engram.adapters.redis_behaviour.codec import encode_fact
from engram.adapters.redis_behaviour.keys import Keys
from engram.adapters.redis_behaviour.log_codec import decode_member, encode_member
from engram.adapters.redis_behaviour.parts import (
    RedisCheckpointStore,
    RedisFactRepository,
    RedisObservationLog,
)
from engram.adapters.redis_behaviour.store import STAGE_MIN_UPSERTS, RedisBehaviourStore

__all__ = [
    "STAGE_MIN_UPSERTS",
    "Keys",
    "RedisBehaviourStore",
    "RedisCheckpointStore",
    "RedisFactRepository",
    "RedisObservationLog",
    "decode_member",
    "encode_fact",
    "encode_member",
]
