"""Composition of the maintenance job from ``Settings`` and a ``Container``'s live clients.

``build_maintenance_job(container, schedule=...)`` picks the adapters behind each port:

==========================  ==================================================================
port                        adapter
==========================  ==================================================================
state                       ``RedisMaintenanceState`` (``{prefix}:maintenance:state``)
behaviour (prune, sweep)    ``BehaviourStoreMaintenance`` over the container's behavioural
                            store and decay strategy
memories (retention,        ``MemoryStoreMaintenance`` over the container's ``MemoryService``
erasure backstop)           and its ``memory_store`` (PostgreSQL)
policies                    ``PostgresRetentionPolicies`` (migration 0003)
erasures                    ``container.erasure_log`` — the log ``DELETE /v1/me`` writes
                            (``PostgresErasureLog``)
queue                       ``SqsTranscriptQueue`` on ``ENGRAM_EXTRACTION_QUEUE_URL`` (dead
                            letters to ``ENGRAM_EXTRACTION_DLQ_URL``); with the local
                            ``LocalSqs``, a pull receiver over its extraction queue
extractor                   ``build_extractor(settings)`` (rules, or Bedrock Converse)
sink                        ``MemoryProposalSink`` over ``MemoryService.propose``
==========================  ==================================================================

Schedules (the ``engramSchedule`` field of the EventBridge event): ``"frequent"`` runs prune,
sweep, erasure and extraction; ``"daily"`` and anything else (the local timer sends none) run
every task, retention included. A retention pass cut off by the budget resumes from its
cursor at the next daily run.

Adapters are imported inside the functions (house style for composition code): importing
this module imports no SDK and connects to nothing. Parts that are expensive to build (the
extractor, the queue adapter) are built once per container.
"""

from __future__ import annotations

import threading
import weakref
from collections.abc import Callable
from typing import TYPE_CHECKING, Any

from engram.clock import Clock
from engram.extraction.drain import ExtractionConfig
from engram.extraction.models import TranscriptJob
from engram.maintenance.job import MaintenanceJob
from engram.maintenance.models import FREQUENT, MaintenanceConfig
from engram.settings import Settings

if TYPE_CHECKING:
    from engram.bootstrap import Container
    from engram.extraction.ports import Extractor
    from engram.maintenance.ports import MaintenanceLease, TranscriptQueue
    from engram.memories.service import MemoryService

_cache: weakref.WeakKeyDictionary[Any, dict[str, Any]] = weakref.WeakKeyDictionary()
_cache_lock = threading.Lock()


def _cached(container: Any, name: str, factory: Callable[[], Any]) -> Any:
    with _cache_lock:
        parts = _cache.setdefault(container, {})
        if name not in parts:
            parts[name] = factory()
        return parts[name]


def maintenance_config(settings: Settings) -> MaintenanceConfig:
    """The job's knobs from ``ENGRAM_*`` settings (the rest keep their defaults)."""
    return MaintenanceConfig(
        observation_retention_days=settings.observation_retention_days,
        sweep_idle_days=settings.maintenance_sweep_idle_days,
        erasure_settle_days=settings.maintenance_erasure_settle_days,
        max_jobs_per_run=settings.maintenance_max_jobs_per_run,
        receive_batch=min(10, settings.extraction_batch_size),
        max_receives=settings.extraction_max_receives,
        safety_margin_ms=settings.maintenance_safety_margin_ms,
        max_run_ms=settings.maintenance_max_run_ms,
    )


def extraction_config_for(
    service: MemoryService,
) -> Callable[[TranscriptJob], ExtractionConfig]:
    """Each job's persona settings: memory switch, persona-scope learning, prompt."""

    def config_for(job: TranscriptJob) -> ExtractionConfig:
        if job.persona_id is None:
            return ExtractionConfig()
        persona = service.persona_settings(job.team_id, job.persona_id)
        return ExtractionConfig.for_persona(
            memory_enabled=persona.memory_enabled,
            extraction_enabled=persona.extraction.enabled,
            prompt=persona.extraction.prompt,
        )

    return config_for


def transcript_queue(container: Container) -> TranscriptQueue | None:
    """The extraction queue as the job pulls it, or None when no queue is configured."""
    url = container.extraction_queue_url
    if not url:
        return None

    def make() -> TranscriptQueue:
        sqs = container.sqs
        if type(sqs).__module__ == "engram.local.sqs":
            from engram.local.pullqueue import receiver_for

            return receiver_for(sqs.queue(url))
        from engram.adapters.transcript_queue import SqsTranscriptQueue

        return SqsTranscriptQueue(sqs, url, container.settings.extraction_dlq_url)

    queue: TranscriptQueue = _cached(container, "queue", make)
    return queue


def extractor(container: Container) -> Extractor:
    def make() -> Extractor:
        from engram.adapters.bedrock_extractor import build_extractor

        return build_extractor(container.settings)

    built: Extractor = _cached(container, "extractor", make)
    return built


def maintenance_lease(container: Container) -> MaintenanceLease:
    """The lease that serialises runs: ``RedisMaintenanceLease`` on the container's Redis."""
    from engram.adapters.maintenance_lease import RedisMaintenanceLease

    return RedisMaintenanceLease(container.redis, prefix=container.settings.redis_key_prefix)


def build_maintenance_job(
    container: Container,
    *,
    schedule: str | None = None,
    extractor_override: Extractor | None = None,
    queue_override: TranscriptQueue | None = None,
    config: MaintenanceConfig | None = None,
    monotonic: Clock | None = None,
) -> MaintenanceJob:
    """The job for one invocation (cheap: the stores and clients are the container's).

    ``extractor_override`` / ``queue_override`` / ``config`` replace the configured ones;
    ``monotonic`` is the clock of the time budget (tests)."""
    from engram.adapters.maintenance_state import RedisMaintenanceState
    from engram.adapters.postgres.retention import PostgresRetentionPolicies
    from engram.maintenance.bridges import BehaviourStoreMaintenance, MemoryStoreMaintenance
    from engram.maintenance.sink import MemoryProposalSink

    settings = container.settings
    behaviour = container.behaviour
    service = container.memories
    store = container.memory_store
    queue = queue_override if queue_override is not None else transcript_queue(container)
    return MaintenanceJob(
        clock=container.clock,
        state=RedisMaintenanceState(container.redis, prefix=settings.redis_key_prefix),
        behaviour=BehaviourStoreMaintenance(behaviour.store, behaviour.decay),
        memories=MemoryStoreMaintenance(service, store),
        policies=(
            None
            if schedule == FREQUENT
            else PostgresRetentionPolicies(container.database, clock=container.clock)
        ),
        erasures=container.erasure_log,
        queue=queue,
        extractor=extractor_override or (extractor(container) if queue is not None else None),
        sink=MemoryProposalSink(service, erasures=container.erasure_log),
        extraction_config_for=extraction_config_for(service),
        config=config or maintenance_config(settings),
        monotonic=monotonic,
    )
