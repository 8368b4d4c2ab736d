"""``Container``: the parts of one process (one per Lambda execution environment), each built
from ``Settings`` on first use. Importing this module or constructing a container connects to
nothing and imports no adapter; every keyword of the constructor replaces the part it names.

The parts on Redis are listed in ``engram.bootstrap.redis_parts``, those on PostgreSQL in
``engram.bootstrap.postgres_parts``; the others:

=======================  ===============================================================
part                     built from
=======================  ===============================================================
``sqs``                  a boto3 SQS client
``ingest_queue``         ``SqsSender`` on ``ENGRAM_INGEST_QUEUE_URL`` (``None`` when unset)
``extraction_queue``     ``SqsSender`` on ``ENGRAM_EXTRACTION_QUEUE_URL`` (``None`` when unset)
``transcript_queue``     the same queue as the maintenance job pulls it: ``SqsTranscriptQueue``
                         (dead letters to ``ENGRAM_EXTRACTION_DLQ_URL``; ``None`` when unset)
``extractor``            ``build_extractor(settings)`` (rules, or Bedrock Converse)
``ingest``               ``IngestService`` (the ingest function)
``sessions``             ``SessionService`` (the session function)
``me``                   ``MeService``: export and erasure across both stores
``event_bus``            ``EventBridgeBus`` on ``ENGRAM_EVENT_BUS_NAME``, else ``JsonlBus`` on
                         ``ENGRAM_EVENTS_FILE`` (default ``<ENGRAM_DATA_DIR>/events.jsonl``)
                         and ``ENGRAM_EVENTS_WEBHOOK_URL``
``events_relay``         ``OutboxRelay`` of the outbox to the bus (the events function)
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
from typing import TYPE_CHECKING, Any

from engram.bootstrap.parts import part
from engram.bootstrap.postgres_parts import PostgresParts
from engram.bootstrap.redis_parts import RedisParts

if TYPE_CHECKING:
    from engram.adapters.cache_rotation import CacheSecretRotation
    from engram.events.ports import EventBus
    from engram.events.relay import OutboxRelay
    from engram.extraction.ports import Extractor
    from engram.maintenance.ports import TranscriptQueue
    from engram.use_cases.ingest import IngestService
    from engram.use_cases.me import MeService
    from engram.use_cases.ports import MessageQueue
    from engram.use_cases.session import SessionService

_log = logging.getLogger("engram.bootstrap")


class Container(RedisParts, PostgresParts):
    """Lazily built parts of one process. Every keyword of ``parts`` is a part (a ``part``
    of this class) given instead of built; ``None`` is a value (say, no ingest queue)."""

    @part
    def sqs(self) -> Any:
        from engram.adapters.sqs import sqs_client

        return sqs_client(self.settings.aws_region)

    def _sender(self, url: str | None) -> MessageQueue | None:
        if not url:
            return None
        from engram.adapters.sqs import SqsSender

        return SqsSender(self.sqs, url)

    @part
    def ingest_queue(self) -> MessageQueue | None:
        from engram.adapters.sqs import SqsSender

        url = self.settings.ingest_queue_url
        if not url:
            return None
        return SqsSender(self.sqs, url, max_batch_bytes=self.settings.ingest_max_message_bytes)

    @part
    def extraction_queue(self) -> MessageQueue | None:
        return self._sender(self.settings.extraction_queue_url)

    @part
    def transcript_queue(self) -> TranscriptQueue | None:
        """The extraction queue as the maintenance job pulls it."""
        s = self.settings
        if not s.extraction_queue_url:
            return None
        from engram.adapters.transcript_queue import SqsTranscriptQueue

        return SqsTranscriptQueue(self.sqs, s.extraction_queue_url, s.extraction_dlq_url)

    @part
    def extractor(self) -> Extractor:
        from engram.adapters.bedrock_extractor import build_extractor

        return build_extractor(self.settings)

    @part
    def ingest(self) -> IngestService:
        from engram.use_cases.ingest import IngestService

        return IngestService(
            self.ingest_queue,
            extraction_queue=self.extraction_queue,
            rules=self.emission_rules,
            clock=self.clock,
            limiter=self.ingest_limiter,
            keys=self.ingest_keys,
            # late: the memory service (PostgreSQL) is built at the first persona check
            persona_access=lambda caller, persona: self.memories.core.check_persona_access(  # noqa: PLW0108
                caller, persona
            ),
            observation_retention_days=self.settings.observation_retention_days,
            retry_window_s=self.settings.ingest_retry_window_s,
            max_message_bytes=self.settings.ingest_max_message_bytes,
        )

    @part
    def sessions(self) -> SessionService:
        from engram.use_cases.session import SessionService

        # a provider, not the service: building it (database URL, secret) happens on the
        # first session's worker thread, and a failure there degrades only that session
        return SessionService(
            self.behaviour,
            lambda: self.memories,
            budget_ms=self.settings.consolidation_budget_ms,
            hint_max_chars=self.settings.memory_hint_max_chars,
        )

    @part
    def me(self) -> MeService:
        from engram.use_cases.me import MeService

        return MeService(self.behaviour, self.memories, clock=self.clock)

    @part
    def event_bus(self) -> EventBus:
        from engram.adapters.eventbridge import EventBridgeBus, JsonlBus, events_client

        s = self.settings
        if s.event_bus_name:
            return EventBridgeBus(events_client(s.aws_region), s.event_bus_name)
        path = s.events_file or s.data_dir / "events.jsonl"
        return JsonlBus(path, webhook_url=s.events_webhook_url)

    @part
    def events_relay(self) -> OutboxRelay:
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

    @part
    def cache_rotation(self) -> CacheSecretRotation:
        from engram.adapters.cache_rotation import rotation_from_settings

        return rotation_from_settings(self.settings, secrets=self._secrets)

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
