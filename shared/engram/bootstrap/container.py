"""``Container``: the parts of one process (one per Lambda execution environment), each built
from ``Settings`` on first use. Importing this module or constructing a container connects to
nothing and imports no adapter; every keyword of the constructor replaces the part it names.

=======================  ===============================================================
part                     built from
=======================  ===============================================================
``redis``                ``make_redis(settings)`` when ``ENGRAM_REDIS_URL``/``REDIS_URL``
                         is set, else the embedded in-process fakeredis (local only)
``behaviour_store``      ``RedisBehaviourStore`` on it
``emission_rules``       ``ENGRAM_EMISSION_RULES_FILE`` (or the defaults)
``behaviour``            ``BehaviourService`` on the store and the rules
``database_url``         ``ENGRAM_DATABASE_URL`` with the credentials of the Secrets Manager
                         secret ``ENGRAM_DATABASE_SECRET_ARN`` when set; without a URL the
                         embedded PostgreSQL under ``ENGRAM_DATA_DIR`` (migrated on first use)
``database``             ``engram.adapters.postgres.pool.Database`` (lazy pool); with the
                         secret every new connection takes the cached secret's credentials,
                         and a refused login reads it again (``DatabaseLogin``)
``memory_store``         ``PostgresMemoryStore`` (memories, personas, team settings)
``embedder``             WordLlama (offline) when ``ENGRAM_EMBEDDER=local``, Bedrock Titan
                         when ``bedrock``, else none
``cursors``              ``CursorSigner`` (review cursors): ``ENGRAM_CURSOR_KEY``, else the
                         secret ``ENGRAM_CURSOR_KEY_SECRET_ARN``, else the key file
                         ``<ENGRAM_DATA_DIR>/keys/cursor-key`` (local only)
``memories``             ``MemoryService`` on the store, the embedder and the cursors
``sqs``                  a boto3 SQS client
``ingest_queue``         ``SqsSender`` on ``ENGRAM_INGEST_QUEUE_URL`` (``None`` when unset)
``extraction_queue``     ``SqsSender`` on ``ENGRAM_EXTRACTION_QUEUE_URL`` (``None`` when unset)
``transcript_queue``     the same queue as the maintenance job pulls it: ``SqsTranscriptQueue``
                         (dead letters to ``ENGRAM_EXTRACTION_DLQ_URL``; ``None`` when unset)
``extractor``            ``build_extractor(settings)`` (rules, or Bedrock Converse)
``erasure_log``          ``PostgresErasureLog`` (who was erased when; read by maintenance)
``maintenance_state``    ``RedisMaintenanceState`` (the job's cursors)
``maintenance_lease``    ``RedisMaintenanceLease`` (one maintenance run at a time)
``ingest_limiter``       ``RateLimiter``: ``ENGRAM_OBSERVATIONS_PER_MINUTE`` per identity
``ingest_keys``          ``RedisIdempotencyKeys`` on the same Redis (``Idempotency-Key``)
``ingest``               ``IngestService`` (the ingest function)
``sessions``             ``SessionService`` (the session function)
``me``                   ``MeService``: export and erasure across both stores
``facts``                ``FactsService``: the caller's facts (the memories function)
``memory_use_cases``     ``MemoryUseCases``: memories, tools, review, personas, team
                         settings (the memories function)
``outbox``               ``PostgresOutbox`` (the relay's side of the event outbox)
``event_bus``            ``EventBridgeBus`` on ``ENGRAM_EVENT_BUS_NAME``, else ``JsonlBus`` on
                         ``ENGRAM_EVENTS_FILE`` (default ``<ENGRAM_DATA_DIR>/events.jsonl``)
                         and ``ENGRAM_EVENTS_WEBHOOK_URL``
``events_relay``         ``OutboxRelay`` of the outbox to the bus (the events function)
``insights``             ``InsightsService`` on ``PostgresInsights`` (``ENGRAM_INSIGHTS_MIN_USERS``)
``cache_rotation``       ``CacheSecretRotation`` of ``ENGRAM_REDIS_SECRET_ARN`` on the
                         ElastiCache user ``ENGRAM_REDIS_USER_ID`` (the cache rotation function)
=======================  ===============================================================

The local service gives its in-process queues (``ingest_queue``, ``extraction_queue``,
``transcript_queue``) instead of SQS. ``engram.bootstrap.maintenance`` builds the maintenance
job from these parts.
"""

# Heavy or optional dependencies are imported where used, so importing this module is cheap.

from __future__ import annotations

import logging
import threading
from collections.abc import Callable
from typing import TYPE_CHECKING, Any, TypeVar

from engram.clock import Clock, SystemClock
from engram.settings import Settings, get_settings

if TYPE_CHECKING:
    from engram.adapters.cache_rotation import CacheSecretRotation
    from engram.adapters.postgres.pool import Database
    from engram.adapters.postgres.store import PostgresMemoryStore
    from engram.adapters.redis_behaviour import RedisBehaviourStore
    from engram.adapters.secrets import SecretsClient
    from engram.behaviour.emission import EmissionRules
    from engram.behaviour.service import BehaviourService
    from engram.events.ports import EventBus, Outbox
    from engram.events.relay import OutboxRelay
    from engram.extraction.ports import Extractor
    from engram.insights.service import InsightsService
    from engram.maintenance.ports import (
        ErasureLog,
        MaintenanceLease,
        MaintenanceStateStore,
        TranscriptQueue,
    )
    from engram.memories.cursors import CursorSigner
    from engram.memories.ports import Embedder
    from engram.memories.service import MemoryService
    from engram.ratelimit import RateLimiter
    from engram.use_cases.facts import FactsService
    from engram.use_cases.ingest import IngestService
    from engram.use_cases.me import MeService
    from engram.use_cases.memories import MemoryUseCases
    from engram.use_cases.ports import IdempotencyKeys, MessageQueue
    from engram.use_cases.session import SessionService

_log = logging.getLogger("engram.bootstrap")
T = TypeVar("T")


class Container:
    """Lazily built parts of one process. Every keyword of ``parts`` is a part (a property
    of this class) given instead of built; ``None`` is a value (say, no ingest queue)."""

    def __init__(
        self,
        settings: Settings | None = None,
        *,
        clock: Clock | None = None,
        secrets: SecretsClient | None = None,
        migrate: bool | None = None,
        **parts: Any,
    ) -> None:
        """``secrets``: the Secrets Manager client the credentials are read with;
        ``migrate=False``: the embedded database is used as it is (the caller migrated it)."""
        unknown = sorted(name for name in parts if not isinstance(_PARTS.get(name), property))
        if unknown:
            raise TypeError(f"not parts of a Container: {', '.join(unknown)}")
        self.settings = settings or get_settings()
        self.clock: Clock = clock or SystemClock()
        self._lock = threading.RLock()
        self._parts: dict[str, Any] = dict(parts)
        self._given = frozenset(parts)
        self._secrets = secrets
        self._migrate = migrate

    def _part(self, name: str, factory: Callable[[], T]) -> T:
        if name in self._parts:
            value: T = self._parts[name]
            return value
        with self._lock:
            if name not in self._parts:
                self._parts[name] = factory()
            built: T = self._parts[name]
            return built

    def built(self, name: str) -> bool:
        """Whether ``name`` was built (or given) — tests use it to prove laziness."""
        return name in self._parts

    def _secret_client(self) -> SecretsClient:
        from engram.adapters.secrets import secrets_client

        return self._secrets or secrets_client(self.settings.aws_region)

    # --- Redis and behavioural memory ---------------------------------------------------
    @property
    def redis(self) -> Any:
        def make() -> Any:
            from engram.adapters.embedded import redis_client

            return redis_client(self.settings, secrets=self._secrets)

        return self._part("redis", make)

    @property
    def behaviour_store(self) -> RedisBehaviourStore:
        def make() -> RedisBehaviourStore:
            from engram.adapters.redis_behaviour import RedisBehaviourStore

            s = self.settings
            return RedisBehaviourStore(
                self.redis,
                prefix=s.redis_key_prefix,
                ttl_days=s.identity_ttl_days,
                clock=self.clock,
            )

        return self._part("behaviour_store", make)

    @property
    def emission_rules(self) -> EmissionRules:
        def make() -> EmissionRules:
            from engram.behaviour.emission import EmissionRules

            return EmissionRules.from_file(self.settings.emission_rules_file)

        return self._part("emission_rules", make)

    @property
    def behaviour(self) -> BehaviourService:
        def make() -> BehaviourService:
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

        return self._part("behaviour", make)

    @property
    def erasure_log(self) -> ErasureLog:
        def make() -> ErasureLog:
            from engram.adapters.postgres.erasures import PostgresErasureLog

            return PostgresErasureLog(self.database, clock=self.clock)

        return self._part("erasure_log", make)

    # --- PostgreSQL and explicit memories -----------------------------------------------
    @property
    def database_url(self) -> str:
        def make() -> str:
            s = self.settings
            if s.database_url:
                if not s.database_secret_arn:
                    return s.database_url
                from engram.adapters.secrets import database_url_from_secret

                return database_url_from_secret(
                    s.database_url, s.database_secret_arn, self._secret_client()
                )
            from engram.adapters.embedded import database_url

            url = database_url(s)
            if self._migrate is not False:
                from engram.adapters.postgres.migrate import apply_migrations

                apply_migrations(url, embedding_dimensions=s.embedding_dimensions)
            return url

        return self._part("database_url", make)

    @property
    def database(self) -> Database:
        def make() -> Database:
            from engram.adapters.postgres.pool import Database

            s = self.settings
            if "database_url" in self._given or not (s.database_url and s.database_secret_arn):
                return Database.from_settings(s, self.database_url)
            from engram.adapters.secrets import DatabaseLogin, Secret

            secret = Secret(
                s.database_secret_arn, self._secret_client(), max_age_s=s.secret_max_age_s
            )
            login = DatabaseLogin(s.database_url, secret)
            return Database.from_settings(s, login.conninfo, refreshed=login.refreshed)

        return self._part("database", make)

    @property
    def memory_store(self) -> PostgresMemoryStore:
        """The PostgreSQL ``MemoryStore`` + ``PersonaStore`` under ``memories`` (also what
        the maintenance job's retention and erasure backstop run on)."""

        def make() -> PostgresMemoryStore:
            from engram.adapters.postgres.store import PostgresMemoryStore

            return PostgresMemoryStore(self.database, self.clock)

        return self._part("memory_store", make)

    @property
    def embedder(self) -> Embedder | None:
        def make() -> Embedder | None:
            if self.settings.embedder == "local":
                from engram.adapters.local_embedder import WordLlamaEmbedder

                return WordLlamaEmbedder()
            if self.settings.embedder != "bedrock":
                return None
            from engram.adapters.bedrock_embedder import BedrockTitanEmbedder

            return BedrockTitanEmbedder.from_settings(self.settings)

        return self._part("embedder", make)

    @property
    def cursors(self) -> CursorSigner:
        """Review cursors signed with the deployment's key, so every process accepts the
        cursors of the others."""

        def make() -> CursorSigner:
            from engram.memories.cursors import CursorSigner

            s = self.settings
            if s.cursor_key is not None:
                key = s.cursor_key.get_secret_value().encode("utf-8")
            elif s.cursor_key_secret_arn:
                from engram.adapters.secrets import secret_string

                key = secret_string(s.cursor_key_secret_arn, self._secret_client()).encode()
            else:
                from engram.adapters.keyfiles import cursor_key

                key = cursor_key(s.data_dir)
            return CursorSigner(key)

        return self._part("cursors", make)

    @property
    def memories(self) -> MemoryService:
        def make() -> MemoryService:
            from engram.memories.service import MemoryService

            store = self.memory_store
            return MemoryService(
                store,
                store,
                embedder=self.embedder,
                settings=self.settings,
                clock=self.clock,
                cursors=self.cursors,
            )

        return self._part("memories", make)

    # --- queues -------------------------------------------------------------------------
    @property
    def sqs(self) -> Any:
        def make() -> Any:
            from engram.adapters.sqs import sqs_client

            return sqs_client(self.settings.aws_region)

        return self._part("sqs", make)

    def _sender(self, url: str | None) -> MessageQueue | None:
        if not url:
            return None
        from engram.adapters.sqs import SqsSender

        return SqsSender(self.sqs, url)

    @property
    def ingest_queue(self) -> MessageQueue | None:
        return self._part("ingest_queue", lambda: self._sender(self.settings.ingest_queue_url))

    @property
    def extraction_queue(self) -> MessageQueue | None:
        return self._part(
            "extraction_queue", lambda: self._sender(self.settings.extraction_queue_url)
        )

    @property
    def transcript_queue(self) -> TranscriptQueue | None:
        """The extraction queue as the maintenance job pulls it."""

        def make() -> TranscriptQueue | None:
            s = self.settings
            if not s.extraction_queue_url:
                return None
            from engram.adapters.transcript_queue import SqsTranscriptQueue

            return SqsTranscriptQueue(self.sqs, s.extraction_queue_url, s.extraction_dlq_url)

        return self._part("transcript_queue", make)

    @property
    def extractor(self) -> Extractor:
        def make() -> Extractor:
            from engram.adapters.bedrock_extractor import build_extractor

            return build_extractor(self.settings)

        return self._part("extractor", make)

    # --- maintenance --------------------------------------------------------------------
    @property
    def maintenance_state(self) -> MaintenanceStateStore:
        def make() -> MaintenanceStateStore:
            from engram.adapters.maintenance_state import RedisMaintenanceState

            return RedisMaintenanceState(self.redis, prefix=self.settings.redis_key_prefix)

        return self._part("maintenance_state", make)

    @property
    def maintenance_lease(self) -> MaintenanceLease:
        """The lease that serialises maintenance runs, on the container's Redis."""

        def make() -> MaintenanceLease:
            from engram.adapters.maintenance_lease import RedisMaintenanceLease

            return RedisMaintenanceLease(self.redis, prefix=self.settings.redis_key_prefix)

        return self._part("maintenance_lease", make)

    # --- ingest -------------------------------------------------------------------------
    @property
    def ingest_limiter(self) -> RateLimiter:
        """``Settings.observations_per_minute`` per identity, on Redis (fails open)."""

        def make() -> RateLimiter:
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

        return self._part("ingest_limiter", make)

    @property
    def ingest_keys(self) -> IdempotencyKeys:
        """``Idempotency-Key`` claims on Redis (ingest fails open when it cannot answer)."""

        def make() -> IdempotencyKeys:
            from engram.adapters.idempotency_keys import RedisIdempotencyKeys

            return RedisIdempotencyKeys(self.redis, prefix=self.settings.redis_key_prefix)

        return self._part("ingest_keys", make)

    # --- application services -----------------------------------------------------------
    @property
    def ingest(self) -> IngestService:
        def make() -> IngestService:
            from engram.use_cases.ingest import IngestService

            return IngestService(
                self.ingest_queue,
                extraction_queue=self.extraction_queue,
                rules=self.emission_rules,
                clock=self.clock,
                limiter=self.ingest_limiter,
                keys=self.ingest_keys,
                # late: the memory service (PostgreSQL) is built at the first persona check
                persona_access=lambda caller, persona: self.memories.check_persona_access(  # noqa: PLW0108
                    caller, persona
                ),
                observation_retention_days=self.settings.observation_retention_days,
                retry_window_s=self.settings.ingest_retry_window_s,
            )

        return self._part("ingest", make)

    @property
    def sessions(self) -> SessionService:
        def make() -> SessionService:
            from engram.use_cases.session import SessionService

            # a provider, not the service: building it (database URL, secret) happens on the
            # first session's worker thread, and a failure there degrades only that session
            return SessionService(
                self.behaviour,
                lambda: self.memories,
                budget_ms=self.settings.consolidation_budget_ms,
                hint_max_chars=self.settings.memory_hint_max_chars,
            )

        return self._part("sessions", make)

    @property
    def me(self) -> MeService:
        def make() -> MeService:
            from engram.use_cases.me import MeService

            return MeService(self.behaviour, self.memories, self.erasure_log, clock=self.clock)

        return self._part("me", make)

    # --- domain events ------------------------------------------------------------------
    @property
    def outbox(self) -> Outbox:
        def make() -> Outbox:
            from engram.adapters.postgres.outbox import PostgresOutbox

            return PostgresOutbox(self.database)

        return self._part("outbox", make)

    @property
    def event_bus(self) -> EventBus:
        def make() -> EventBus:
            from engram.adapters.eventbridge import EventBridgeBus, JsonlBus, events_client

            s = self.settings
            if s.event_bus_name:
                return EventBridgeBus(events_client(s.aws_region), s.event_bus_name)
            path = s.events_file or s.data_dir / "events.jsonl"
            return JsonlBus(path, webhook_url=s.events_webhook_url)

        return self._part("event_bus", make)

    @property
    def events_relay(self) -> OutboxRelay:
        def make() -> OutboxRelay:
            from engram.events.relay import OutboxRelay

            s = self.settings
            return OutboxRelay(
                self.outbox,
                self.event_bus,
                clock=self.clock,
                max_attempts=s.events_max_attempts,
                lease_ms=s.events_lease_s * 1000,
                keep_sent_ms=s.events_keep_sent_s * 1000,
            )

        return self._part("events_relay", make)

    @property
    def facts(self) -> FactsService:
        def make() -> FactsService:
            from engram.use_cases.facts import FactsService

            return FactsService(self.behaviour)

        return self._part("facts", make)

    @property
    def memory_use_cases(self) -> MemoryUseCases:
        def make() -> MemoryUseCases:
            from engram.use_cases.memories import MemoryUseCases

            return MemoryUseCases(self.memories)

        return self._part("memory_use_cases", make)

    @property
    def insights(self) -> InsightsService:
        def make() -> InsightsService:
            from engram.adapters.postgres.insights import PostgresInsights
            from engram.insights.service import InsightsService

            return InsightsService(
                PostgresInsights(self.database), min_users=self.settings.insights_min_users
            )

        return self._part("insights", make)

    @property
    def cache_rotation(self) -> CacheSecretRotation:
        def make() -> CacheSecretRotation:
            from engram.adapters.cache_rotation import rotation_from_settings

            return rotation_from_settings(self.settings, secrets=self._secrets)

        return self._part("cache_rotation", make)

    # --- health -------------------------------------------------------------------------
    def ping_redis(self) -> bool:
        return bool(self.redis.ping())

    def ping_postgres(self) -> bool:
        with self.database.pool.connection(timeout=1.0) as conn:
            conn.execute("SELECT 1")
        return True

    def close(self) -> None:
        """Stop worker threads and close pools (local shutdown, tests)."""
        with self._lock:
            parts = dict(self._parts)
        sessions = parts.get("sessions")
        if sessions is not None:
            try:
                sessions.close()
            except Exception:
                _log.warning("closing sessions failed", exc_info=True)
        db = parts.get("database")
        if db is not None:
            db.close()


_PARTS = vars(Container)
_container: Container | None = None
_container_lock = threading.Lock()


def get_container() -> Container:
    """The process's container (built from ``get_settings()`` on first call)."""
    global _container  # noqa: PLW0603
    if _container is None:
        with _container_lock:
            if _container is None:
                _container = Container()
    return _container


def set_container(container: Container | None) -> Container | None:
    """Install ``container`` (``None``: build from settings on next use); returns the old one."""
    global _container
    with _container_lock:
        old, _container = _container, container
    return old
