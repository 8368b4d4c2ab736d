"""``RateLimitStore`` adapters: Redis (one round trip, cluster-safe) and in-memory.

Redis: one key per limit and identity, ``P:rl:{<digest>}`` where ``<digest>`` is the first 24
hex characters of SHA-256 of the limiter key (``observations:<identityId>``). The braces are a
hash tag, so the key is a single-slot key on ElastiCache Serverless / cluster mode, and no user
id is written into Redis by the limiter (an erasure scan for the user finds nothing of it; the
key expires on its own about one window after the last admitted unit).

Each check is one ``EVALSHA`` (redis-py's ``Script`` falls back to ``EVAL`` once if the script
cache was flushed): the script reads, decides and writes atomically, so concurrent Lambdas
never admit more than the limit. Both algorithms of ``engram.ratelimit`` are implemented:

- ``sliding``: the key is a sorted set of admitted requests (member ``<cost>:<random token>``,
  score = time in ms); entries a window old are trimmed by each check and the key expires one
  window (+1 s) after the last admitted request. At most ``limit`` members;
- ``fixed``: the key ``...:<windowIndex>`` holds the units admitted in that calendar window,
  expiring at the window's end.

Connection errors and timeouts become ``engram.errors.Unavailable`` (the limiter's fail-open
policy decides what that means).
"""

from __future__ import annotations

import hashlib
import threading
import uuid
from bisect import insort
from collections.abc import Iterator
from contextlib import contextmanager
from typing import Any

import redis

from engram.adapters.redis_client import RedisClient
from engram.errors import Unavailable
from engram.ratelimit import Algorithm, Decision, Hit, RateLimiter, fixed_window, sliding_window
from engram.settings import Settings

# KEYS[1] key; ARGV: cost, limit, window_ms, now_ms, algorithm ('sliding' | 'fixed'), token
# returns {allowed (0/1), remaining, retry_after_ms}
_LUA = r"""
local cost = tonumber(ARGV[1])
local limit = tonumber(ARGV[2])
local window = tonumber(ARGV[3])
local now = tonumber(ARGV[4])
if ARGV[5] == 'fixed' then
  local key = KEYS[1]
  local used = tonumber(redis.call('GET', key) or '0')
  local window_end = (math.floor(now / window) + 1) * window
  if used + cost > limit then
    local left = limit - used
    if left < 0 then left = 0 end
    return {0, left, window_end - now}
  end
  redis.call('INCRBY', key, cost)
  redis.call('PEXPIRE', key, window_end - now + 1000)
  return {1, limit - used - cost, 0}
end
-- sliding log: members '<cost>:<token>' scored by their time; live while time > now - window
redis.call('ZREMRANGEBYSCORE', KEYS[1], '-inf', now - window)
local rows = redis.call('ZRANGE', KEYS[1], 0, -1, 'WITHSCORES')
local used = 0
for i = 1, #rows, 2 do
  used = used + tonumber(string.match(rows[i], '^(%d+):'))
end
if used + cost > limit then
  local need = used + cost - limit
  local freed = 0
  local retry = window
  for i = 1, #rows, 2 do
    freed = freed + tonumber(string.match(rows[i], '^(%d+):'))
    if freed >= need then
      retry = tonumber(rows[i + 1]) + window - now
      break
    end
  end
  if retry < 1 then retry = 1 end
  local left = limit - used
  if left < 0 then left = 0 end
  return {0, left, retry}
end
redis.call('ZADD', KEYS[1], now, cost .. ':' .. ARGV[6])
redis.call('PEXPIRE', KEYS[1], window + 1000)
return {1, limit - used - cost, 0}
"""


def hashed_key(prefix: str, key: str) -> str:
    """``P:rl:{digest}``: a single-slot key that does not spell out the identity."""
    digest = hashlib.sha256(key.encode("utf-8", errors="surrogatepass")).hexdigest()[:24]
    return f"{prefix}:rl:{{{digest}}}"


@contextmanager
def _reachable() -> Iterator[None]:
    """Connection errors and timeouts of the block as ``Unavailable``."""
    try:
        yield
    except (redis.ConnectionError, redis.TimeoutError) as exc:
        raise Unavailable(f"rate limit store unavailable: {type(exc).__name__}") from exc


class RedisRateLimitStore:
    """``RateLimitStore`` on Redis: one round trip per check (see the module docstring)."""

    def __init__(self, client: RedisClient, *, prefix: str = "engram") -> None:
        self.client = client
        self.prefix = prefix
        self._script: Any = client.register_script(_LUA)
        self.round_trips = 0

    def redis_key(self, key: str) -> str:
        return hashed_key(self.prefix, key)

    def _key_for(self, key: str, algorithm: Algorithm, now_ms: int, window_ms: int) -> str:
        base = self.redis_key(key)
        # the fixed window's key names its window: same hash tag, so the same slot
        return f"{base}:{now_ms // window_ms}" if algorithm == "fixed" else base

    def hit(self, key: str, request: Hit) -> Decision:
        name = self._key_for(key, request.algorithm, request.now_ms, request.window_ms)
        args = [request.cost, request.limit, request.window_ms, request.now_ms, request.algorithm]
        with _reachable():
            self.round_trips += 1
            allowed, remaining, retry_ms = self._script(keys=[name], args=[*args, uuid.uuid4().hex])
        return Decision(
            allowed=bool(int(allowed)),
            limit=request.limit,
            remaining=int(remaining),
            retry_after_ms=int(retry_ms),
        )

    def reset(self, key: str, *, window_ms: int, now_ms: int) -> None:
        """Delete the sliding log and the fixed windows of now and just before (a fixed
        window's key lives one second past its end): named, never listed, so the ACL need
        not grant SCAN. One ``DEL`` of keys sharing one slot."""
        index = now_ms // window_ms
        names = [self.redis_key(key)]
        names += [self._key_for(key, "fixed", i * window_ms, window_ms) for i in (index - 1, index)]
        with _reachable():
            self.client.delete(*names)


class InMemoryRateLimitStore:
    """``RateLimitStore`` in one process (tests, single-process tools): same arithmetic."""

    def __init__(self) -> None:
        self._lock = threading.Lock()
        self._log: dict[str, list[tuple[int, int]]] = {}
        self._fixed: dict[str, tuple[int, int]] = {}  # key -> (window index, used)

    def hit(self, key: str, request: Hit) -> Decision:
        now_ms, window_ms = request.now_ms, request.window_ms
        with self._lock:
            if request.algorithm == "fixed":
                index = now_ms // window_ms
                seen_index, used = self._fixed.get(key, (index, 0))
                if seen_index != index:
                    used = 0
                decision, used = fixed_window(used, request)
                self._fixed[key] = (index, used)
                return decision
            log = [e for e in self._log.get(key, []) if e[0] > now_ms - window_ms]
            decision = sliding_window(log, request)
            if decision.allowed:
                insort(log, (now_ms, request.cost))
            self._log[key] = log
            return decision

    def reset(self, key: str, *, window_ms: int, now_ms: int) -> None:
        with self._lock:
            self._log.pop(key, None)
            self._fixed.pop(key, None)

    def keys(self) -> list[str]:
        with self._lock:
            return sorted({*self._log, *self._fixed})


def observation_limiter(
    settings: Settings, client: RedisClient | None = None, *, clock: Any = None
) -> RateLimiter:
    """The ingest limiter: ``Settings.observations_per_minute`` per identity per 60 s, sliding,
    on Redis when ``client`` is given (else in memory, one process only)."""
    store: RedisRateLimitStore | InMemoryRateLimitStore
    store = (
        RedisRateLimitStore(client, prefix=settings.redis_key_prefix)
        if client is not None
        else InMemoryRateLimitStore()
    )
    return RateLimiter(
        store,
        limit=settings.observations_per_minute,
        window_s=60,
        name="observations",
        clock=clock,
    )


__all__ = [
    "InMemoryRateLimitStore",
    "RedisRateLimitStore",
    "hashed_key",
    "observation_limiter",
]
