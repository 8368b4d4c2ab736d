"""The parts of a ``Container`` that live on Redis: behavioural memory, the maintenance
job's cursors and lease, ingest's rate limit and idempotency keys.

=======================  ===============================================================
part                     built from
=======================  ===============================================================
``redis``                ``make_redis(settings)`` when ``ENGRAM_REDIS_URL``/``REDIS_URL``
                         is set, else the embedded in-process fakeredis (local only)
``behaviour_store``      ``RedisBehaviourStore`` on it
``emission_rules``       ``ENGRAM_EMISSION_RULES_FILE`` (or the defaults)
``behaviour``            ``BehaviourService`` on the store and the rules
``maintenance_state``    ``RedisMaintenanceState`` (the job's cursors)
``maintenance_lease``    ``RedisMaintenanceLease`` (one maintenance run at a time)
``ingest_limiter``       ``RateLimiter``: ``ENGRAM_OBSERVATIONS_PER_MINUTE`` per identity
``ingest_keys``          ``RedisIdempotencyKeys`` on the same Redis (``Idempotency-Key``)
=======================  ===============================================================
"""

# Heavy or optional dependencies are imported where used, so importing this module is cheap.

from __future__ import annotations

from typing import TYPE_CHECKING, Any

from engram.bootstrap.parts import Parts, part

if TYPE_CHECKING:
    from engram.adapters.redis_behaviour import RedisBehaviourStore
    from engram.behaviour.emission import EmissionRules
    from engram.behaviour.service import BehaviourService
    from engram.maintenance.ports import MaintenanceLease, MaintenanceStateStore
    from engram.ratelimit import RateLimiter
    from engram.use_cases.ports import IdempotencyKeys


class RedisParts(Parts):
    """Behavioural memory and the other Redis-backed parts."""

    @part
    def redis(self) -> Any:
        from engram.adapters.embedded import redis_client

        return redis_client(self.settings, secrets=self._secrets)

    @part
    def behaviour_store(self) -> RedisBehaviourStore:
        from engram.adapters.redis_behaviour import RedisBehaviourStore

        s = self.settings
        return RedisBehaviourStore(
            self.redis,
            prefix=s.redis_key_prefix,
            ttl_days=s.identity_ttl_days,
            clock=self.clock,
        )

    @part
    def emission_rules(self) -> EmissionRules:
        from engram.behaviour.emission import EmissionRules

        return EmissionRules.from_file(self.settings.emission_rules_file)

    @part
    def behaviour(self) -> BehaviourService:
        from engram.behaviour.decay import decay_from_name
        from engram.behaviour.service import BehaviourService

        s = self.settings
        return BehaviourService(
            self.behaviour_store,
            decay=decay_from_name(s.decay),
            clock=self.clock,
            token_budget=s.prompt_token_budget,
            rules=self.emission_rules,
            observation_retention_days=s.observation_retention_days,
        )

    @part
    def maintenance_state(self) -> MaintenanceStateStore:
        from engram.adapters.maintenance_state import RedisMaintenanceState

        return RedisMaintenanceState(self.redis, prefix=self.settings.redis_key_prefix)

    @part
    def maintenance_lease(self) -> MaintenanceLease:
        """The lease that serialises maintenance runs, on the container's Redis."""
        from engram.adapters.maintenance_lease import RedisMaintenanceLease

        return RedisMaintenanceLease(self.redis, prefix=self.settings.redis_key_prefix)

    @part
    def ingest_limiter(self) -> RateLimiter:
        """``Settings.observations_per_minute`` per identity, on Redis (fails open)."""
        from engram.adapters.redis_ratelimit import RedisRateLimitStore
        from engram.ratelimit import RateLimiter

        store = RedisRateLimitStore(self.redis, prefix=self.settings.redis_key_prefix)
        return RateLimiter(
            store,
            limit=self.settings.observations_per_minute,
            window_s=60,
            name="observations",
            clock=self.clock,
        )

    @part
    def ingest_keys(self) -> IdempotencyKeys:
        """``Idempotency-Key`` claims on Redis (ingest fails open when it cannot answer)."""
        from engram.adapters.idempotency_keys import RedisIdempotencyKeys

        return RedisIdempotencyKeys(self.redis, prefix=self.settings.redis_key_prefix)

    def ping_redis(self) -> bool:
        return bool(self.redis.ping())
