"""The maintenance job assembled from a ``Container``'s parts (the composition of one run).

==========================  ==================================================================
port                        part
==========================  ==================================================================
state                       ``container.maintenance_state`` (``{prefix}:maintenance:state``)
behaviour (prune, sweep)    ``BehaviourStoreMaintenance`` over the behavioural store and decay
memories (retention,        ``MemoryStoreMaintenance`` over the ``MemoryService`` and its
erasure backstop)           ``memory_store`` (PostgreSQL)
policies                    ``PostgresRetentionPolicies`` (migration 0003); not on the
                            frequent schedule
erasures                    ``container.erasure_log`` — the log ``DELETE /v1/me`` writes
queue                       ``container.transcript_queue`` (SQS in AWS; the local service gives
                            a pull receiver over its extraction queue)
extractor                   ``container.extractor`` (rules, or Bedrock Converse)
sink                        ``MemoryProposalSink`` over ``MemoryService.jobs.propose_outcome``
facts, insights             the behaviour bridge (keyset pages of the identity index, current
                            facts) and ``PostgresInsights`` (migration 0012); not on the
                            frequent schedule
embeddings, embedder        ``memory_store`` (its backlog of rows not embedded with the
                            embedder) and ``container.embedder`` (none: the task is skipped)
==========================  ==================================================================

Schedules (the ``engramSchedule`` field of the EventBridge event): ``"frequent"`` runs prune,
sweep, erasure and extraction; ``"daily"`` and anything else (the local timer sends none) run
every task, retention and team insights included. A retention or insights pass cut off by
the budget resumes from its cursor at the next daily run. Building a job is cheap: the stores
and clients are the container's, built once.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import TYPE_CHECKING

from engram.clock import Clock
from engram.extraction.drain import ExtractionConfig
from engram.extraction.models import TranscriptJob
from engram.maintenance.budget import MonotonicClock
from engram.maintenance.job import MaintenanceJob
from engram.maintenance.models import FREQUENT, MaintenanceConfig
from engram.settings import Settings

if TYPE_CHECKING:
    from engram.bootstrap.container import Container
    from engram.extraction.ports import Extractor
    from engram.maintenance.ports import TranscriptQueue
    from engram.memories.service import MemoryService


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
        insights_min_users=settings.insights_min_users,
        embedding_batch=settings.reembed_batch_size,
        history_retention_days=settings.history_retention_days,
    )


def extraction_config_for(
    service: MemoryService,
) -> Callable[[TranscriptJob], ExtractionConfig]:
    """Each job's persona settings: memory switch, persona-scope learning, prompt."""

    def config_for(job: TranscriptJob) -> ExtractionConfig:
        if job.persona_id is None:
            return ExtractionConfig()
        persona = service.personas.persona_settings(job.team_id, job.persona_id)
        return ExtractionConfig.for_persona(
            memory_enabled=persona.memory_enabled,
            extraction_enabled=persona.extraction.enabled,
            prompt=persona.extraction.prompt,
        )

    return config_for


def build_maintenance_job(
    container: Container,
    *,
    schedule: str | None = None,
    extractor_override: Extractor | None = None,
    queue_override: TranscriptQueue | None = None,
    config: MaintenanceConfig | None = None,
    monotonic: Clock | None = None,
) -> MaintenanceJob:
    """The job for one invocation. ``extractor_override`` / ``queue_override`` / ``config``
    replace the container's; ``monotonic`` is the clock of the time budget (tests)."""
    from engram.adapters.postgres.insights import PostgresInsights
    from engram.adapters.postgres.retention import PostgresRetentionPolicies
    from engram.maintenance.bridges import BehaviourStoreMaintenance, MemoryStoreMaintenance
    from engram.maintenance.sink import MemoryProposalSink

    behaviour = container.behaviour
    service = container.memories
    queue = queue_override if queue_override is not None else container.transcript_queue
    extractor = extractor_override or (container.extractor if queue is not None else None)
    bridge = BehaviourStoreMaintenance(behaviour.store, behaviour.decay)
    daily = schedule != FREQUENT
    return MaintenanceJob(
        clock=container.clock,
        state=container.maintenance_state,
        behaviour=bridge,
        facts=bridge if daily else None,
        insights=PostgresInsights(container.database) if daily else None,
        memories=MemoryStoreMaintenance(service.jobs, container.memory_store),
        policies=(
            None
            if schedule == FREQUENT
            else PostgresRetentionPolicies(container.database, clock=container.clock)
        ),
        erasures=container.erasure_log,
        queue=queue,
        extractor=extractor,
        sink=MemoryProposalSink(service.jobs, erasures=container.erasure_log),
        extraction_config_for=extraction_config_for(service),
        config=config or maintenance_config(container.settings),
        monotonic=monotonic or MonotonicClock(),
        embeddings=container.memory_store,
        history=container.memory_store,
        embedder=container.embedder,
    )
