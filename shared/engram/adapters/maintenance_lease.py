"""The maintenance lease (``engram.maintenance.ports.MaintenanceLease``) in Redis.

``{prefix}:maintenance:lease`` holds the holder's random token with a TTL (``SET NX PX``) and is
released only by that token (compare-and-delete in one Lua script);
``{prefix}:maintenance:pending`` is the set of schedules skipped while it was held. Each
operation touches one key, so it works on Redis Cluster as well.

Why Redis and not PostgreSQL: the job's cursors, which serial runs protect, are in Redis
(``engram.adapters.maintenance_state``), a TTL frees the lease of a crashed run without any
sweeper, and a PostgreSQL advisory lock would be tied to a session, which RDS Proxy pins for
as long as the lock is held.
"""

from __future__ import annotations

import secrets
from typing import Any

_RELEASE = """
if redis.call('get', KEYS[1]) == ARGV[1] then
  return redis.call('del', KEYS[1])
end
return 0
"""


def _text(value: Any) -> str:
    return value.decode() if isinstance(value, bytes) else str(value)


class RedisMaintenanceLease:
    def __init__(self, client: Any, *, prefix: str = "engram") -> None:
        self.client = client
        self.key = f"{prefix}:maintenance:lease"
        self.pending_key = f"{prefix}:maintenance:pending"

    def acquire(self, ttl_ms: int) -> str | None:
        token = secrets.token_hex(16)
        return token if self.client.set(self.key, token, nx=True, px=max(1, ttl_ms)) else None

    def release(self, token: str) -> None:
        self.client.eval(_RELEASE, 1, self.key, token)

    def holder(self) -> str | None:
        """The token holding the lease now, if any (for operators and tests)."""
        value = self.client.get(self.key)
        return None if value is None else _text(value)

    def add_pending(self, schedule: str) -> None:
        self.client.sadd(self.pending_key, schedule)

    def take_pending(self) -> set[str]:
        pipe = self.client.pipeline(transaction=True)
        pipe.smembers(self.pending_key)
        pipe.delete(self.pending_key)
        members, _ = pipe.execute()
        return {_text(m) for m in members}
