"""``IdempotencyKeys`` adapters: Redis (one round trip, cluster-safe) and in-memory.

Redis: one string key per claimed ``Idempotency-Key``, ``P:idem:{<digest>}`` where ``<digest>``
is the first 24 hex characters of SHA-256 of the scope (caller, route and key). The braces are
a hash tag (a single-slot key on ElastiCache Serverless / cluster mode). The value is
``<firstMs>:<expiresMs>:<bodyDigest>``: no user id and no body text is written, so an
erasure scan for the user finds nothing of it, and it expires on its own (``PX`` = the
claim's lifetime).

Expiry is decided by the caller's clock (``now_ms``), not by Redis' own: a claim whose
``expiresMs`` has passed is replaced even if the key has not expired yet, so a fake clock can
walk past it in tests, and the ``PX`` only reclaims memory.

Connection errors and timeouts become ``engram.errors.Unavailable`` (the ingest use case
decides what that means: it fails open).
"""

from __future__ import annotations

import hashlib
import threading
from typing import Any

import redis

from engram.adapters.redis_client import RedisClient
from engram.errors import Unavailable
from engram.use_cases.ports import KeyClaim

# KEYS[1] claim key; ARGV: digest, now_ms, expires_ms, ttl_ms -> {first_ms, digest}
_LUA = r"""
local held = redis.call('GET', KEYS[1])
if held then
  local first, expires, digest = string.match(held, '^(%d+):(%d+):(%x+)$')
  if first and tonumber(expires) > tonumber(ARGV[2]) then return {first, digest} end
end
redis.call('SET', KEYS[1], ARGV[2] .. ':' .. ARGV[3] .. ':' .. ARGV[1], 'PX', ARGV[4])
return {ARGV[2], ARGV[1]}
"""


def claim_key(prefix: str, scope: str) -> str:
    """``P:idem:{digest}``: a single-slot key that does not spell out the caller or the key."""
    digest = hashlib.sha256(scope.encode("utf-8", errors="surrogatepass")).hexdigest()[:24]
    return f"{prefix}:idem:{{{digest}}}"


def _text(value: Any) -> str:
    return value.decode() if isinstance(value, bytes) else str(value)


class RedisIdempotencyKeys:
    """``IdempotencyKeys`` on Redis: one ``EVALSHA`` per claim (see the module docstring)."""

    def __init__(self, client: RedisClient, *, prefix: str = "engram") -> None:
        self.client = client
        self.prefix = prefix
        self._script: Any = client.register_script(_LUA)

    def claim(self, scope: str, digest: str, *, now_ms: int, ttl_ms: int) -> KeyClaim:
        try:
            first, held = self._script(
                keys=[claim_key(self.prefix, scope)],
                args=[digest, now_ms, now_ms + ttl_ms, ttl_ms],
            )
        except (redis.ConnectionError, redis.TimeoutError) as exc:
            raise Unavailable(f"idempotency key store unavailable: {type(exc).__name__}") from exc
        return KeyClaim(digest=_text(held), first_ms=int(_text(first)))


class InMemoryIdempotencyKeys:
    """``IdempotencyKeys`` in one process (tests, single-process tools): the same rule."""

    def __init__(self) -> None:
        self._lock = threading.Lock()
        self._claims: dict[str, tuple[KeyClaim, int]] = {}  # scope -> (claim, expires_ms)
        self._sweep_at = 1024

    def claim(self, scope: str, digest: str, *, now_ms: int, ttl_ms: int) -> KeyClaim:
        with self._lock:
            held = self._claims.get(scope)
            if held is not None and held[1] > now_ms:
                return held[0]
            if len(self._claims) >= self._sweep_at:  # claims past their lifetime go
                self._claims = {s: c for s, c in self._claims.items() if c[1] > now_ms}
                self._sweep_at = max(1024, 2 * len(self._claims))
            claim = KeyClaim(digest=digest, first_ms=now_ms)
            self._claims[scope] = (claim, now_ms + ttl_ms)
            return claim


__all__ = ["InMemoryIdempotencyKeys", "RedisIdempotencyKeys", "claim_key"]
