"""The composition root: the one place that picks concrete adapters.

A ``Container`` is built per process (one per Lambda execution environment) from ``Settings``
and builds each part on first use: importing this module or constructing a container connects
to nothing and imports no adapter. Tests and the local service build a container from explicit
parts (fakes, a ``LocalSqs``, an embedded database URL) and install it with
``set_container``; handlers call ``get_container()``.

=====================  =================================================================
part                   built from
=====================  =================================================================
``redis``              ``make_redis(settings)`` when ``ENGRAM_REDIS_URL``/``REDIS_URL`` is
                       set, else the embedded in-process fakeredis (local only)
``behaviour``          ``BehaviourService`` on ``RedisBehaviourStore``
``database_url``       ``ENGRAM_DATABASE_URL`` with the credentials of the Secrets Manager
                       secret ``ENGRAM_DATABASE_SECRET_ARN`` when set; without a URL the
                       embedded PostgreSQL under ``ENGRAM_DATA_DIR`` (migrated on first use)
``database``           ``engram.adapters.postgres.pool.Database`` (lazy pool); with the secret
                       every new connection takes the cached secret's credentials, and a
                       refused login reads it again (``DatabaseLogin``)
``memory_store``       ``PostgresMemoryStore`` (memories, personas, team settings)
``cursors``            ``CursorSigner`` (review cursors): ``ENGRAM_CURSOR_KEY``, else the
                       Secrets Manager secret ``ENGRAM_CURSOR_KEY_SECRET_ARN``, else the
                       key file ``<ENGRAM_DATA_DIR>/keys/cursor-key`` (local only)
``memories``           ``MemoryService`` on it (+ Bedrock embedder when
                       ``ENGRAM_EMBEDDER=bedrock``)
``sqs``                a boto3 SQS client (or the injected ``LocalSqs``)
``ingest_queue``       ``SqsSender`` on ``ENGRAM_INGEST_QUEUE_URL`` (``None`` when unset)
``extraction_queue``   ``SqsSender`` on ``ENGRAM_EXTRACTION_QUEUE_URL`` (``None`` when unset)
``erasure_log``        ``PostgresErasureLog`` (who was erased when; read by maintenance)
``ingest_limiter``     ``RateLimiter``: ``ENGRAM_OBSERVATIONS_PER_MINUTE`` per identity on Redis
``ingest_keys``        ``RedisIdempotencyKeys`` on the same Redis (``Idempotency-Key`` claims)
``ingest``             ``IngestService`` (the ingest function)
``sessions``           ``SessionService`` (the session function)
``me``                 ``MeService``: export and erasure across both stores
``cache_rotation``     ``CacheSecretRotation`` of ``ENGRAM_REDIS_SECRET_ARN`` on the ElastiCache
                       user ``ENGRAM_REDIS_USER_ID`` (the cache rotation function)
=====================  =================================================================
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
    from engram.adapters.secrets import SecretsClient
    from engram.behaviour.service import BehaviourService
    from engram.maintenance.ports import ErasureLog
    from engram.memories.cursors import CursorSigner
    from engram.memories.ports import Embedder
    from engram.memories.service import MemoryService
    from engram.ratelimit import RateLimiter
    from engram.use_cases.ingest import IngestService
    from engram.use_cases.me import MeService
    from engram.use_cases.ports import IdempotencyKeys, MessageQueue
    from engram.use_cases.session import SessionService

_log = logging.getLogger("engram.bootstrap")
T = TypeVar("T")
_UNSET: Any = object()


class Container:
    """Lazily built parts of one process. Every keyword overrides the part it names."""

    def __init__(
        self,
        settings: Settings | None = None,
        *,
        clock: Clock | None = None,
        redis: Any = None,
        behaviour: BehaviourService | None = None,
        database_url: str | None = None,
        database: Database | None = None,
        memories: MemoryService | None = None,
        embedder: Embedder | None = None,
        sqs: Any = None,
        secrets: SecretsClient | None = None,
        ingest_queue: MessageQueue | None = _UNSET,
        extraction_queue: MessageQueue | None = _UNSET,
        erasure_log: ErasureLog | None = None,
        migrate: bool | None = None,
        extraction_queue_url: str | None = None,
    ) -> None:
        self.settings = settings or get_settings()
        self.clock: Clock = clock or SystemClock()
        self._lock = threading.RLock()
        self._parts: dict[str, Any] = {}
        self._embedder = embedder
        self._secrets = secrets
        self._migrate = migrate
        #: where the extraction queue lives (``Settings.extraction_queue_url`` or the local one)
        self.extraction_queue_url = extraction_queue_url or self.settings.extraction_queue_url
        given = {
            "redis": redis,
            "behaviour": behaviour,
            "database_url": database_url,
            "database": database,
            "memories": memories,
            "sqs": sqs,
            "erasure_log": erasure_log,
        }
        self._parts.update({k: v for k, v in given.items() if v is not None})
        self._given = frozenset(self._parts)
        if ingest_queue is not _UNSET:
            self._parts["ingest_queue"] = ingest_queue
        if extraction_queue is not _UNSET:
            self._parts["extraction_queue"] = extraction_queue

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

    # --- Redis and behavioural memory ---------------------------------------------------
    @property
    def redis(self) -> Any:
        def make() -> Any:
            from engram.adapters.embedded import redis_client

            return redis_client(self.settings, secrets=self._secrets)

        return self._part("redis", make)

    @property
    def behaviour(self) -> BehaviourService:
        def make() -> BehaviourService:
            from engram.adapters.redis_behaviour import RedisBehaviourStore
            from engram.behaviour.decay import decay_from_name
            from engram.behaviour.emission import EmissionRules
            from engram.behaviour.service import BehaviourService

            s = self.settings
            store = RedisBehaviourStore(
                self.redis,
                prefix=s.redis_key_prefix,
                ttl_days=s.identity_ttl_days,
                clock=self.clock,
            )
            return BehaviourService(
                store,
                decay=decay_from_name(s.decay),
                clock=self.clock,
                consolidation_budget_ms=s.consolidation_budget_ms,
                token_budget=s.prompt_token_budget,
                rules=EmissionRules.from_file(s.emission_rules_file),
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
                from engram.adapters.secrets import database_url_from_secret, secrets_client

                client = self._secrets or secrets_client(s.aws_region)
                return database_url_from_secret(s.database_url, s.database_secret_arn, client)
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
            from engram.adapters.secrets import DatabaseLogin, Secret, secrets_client

            client = self._secrets or secrets_client(s.aws_region)
            secret = Secret(s.database_secret_arn, client, max_age_s=s.secret_max_age_s)
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
    def cursors(self) -> CursorSigner:
        """Review cursors signed with the deployment's key, so every process accepts the
        cursors of the others."""

        def make() -> CursorSigner:
            from engram.memories.cursors import CursorSigner

            s = self.settings
            if s.cursor_key is not None:
                key = s.cursor_key.get_secret_value().encode("utf-8")
            elif s.cursor_key_secret_arn:
                from engram.adapters.secrets import secret_string, secrets_client

                client = self._secrets or secrets_client(s.aws_region)
                key = secret_string(s.cursor_key_secret_arn, client).encode("utf-8")
            else:
                from engram.local.keyfiles import cursor_key

                key = cursor_key(s.data_dir)
            return CursorSigner(key)

        return self._part("cursors", make)

    @property
    def memories(self) -> MemoryService:
        def make() -> MemoryService:
            from engram.memories.service import MemoryService

            embedder = self._embedder
            if embedder is None and self.settings.embedder == "bedrock":
                from engram.adapters.bedrock_embedder import BedrockTitanEmbedder

                embedder = BedrockTitanEmbedder.from_settings(self.settings)
            store = self.memory_store
            return MemoryService(
                store,
                store,
                embedder=embedder,
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
                rules=self.behaviour.rules,
                clock=self.clock,
                limiter=self.ingest_limiter,
                keys=self.ingest_keys,
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
        for name in ("sessions", "behaviour"):
            part = parts.get(name)
            if part is not None:
                try:
                    part.close()
                except Exception:
                    _log.warning("closing %s failed", name, exc_info=True)
        db = parts.get("database")
        if db is not None:
            db.close()


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
