"""The scheduled maintenance job (pure domain): prune, sweep, memory retention, erasure
backstop and extraction, as bounded tasks under one time budget that resume from a persisted
cursor. The Lambda handler (``functions/maintenance``) wires adapters to the ports and emits
the report's metrics. See ``docs/operations.md``.

``engram.maintenance.bridges`` adapts the concrete behavioural and memory stores to the ports.
"""

from __future__ import annotations

from engram.maintenance.budget import Budget, MonotonicClock
from engram.maintenance.job import ErasureAwareSink, MaintenanceJob
from engram.maintenance.models import (
    TASK_ORDER,
    ErasureRecord,
    MaintenanceConfig,
    MaintenanceReport,
    MaintenanceState,
    QueueMessage,
    RetentionPolicy,
    TaskName,
    TaskReport,
)
from engram.maintenance.ports import (
    BehaviourMaintenance,
    ErasureLog,
    MaintenanceStateStore,
    MemoryMaintenance,
    PersonaRetention,
    RetentionPolicySource,
    TranscriptQueue,
)
from engram.maintenance.tasks import identity_id

__all__ = [
    "TASK_ORDER",
    "BehaviourMaintenance",
    "Budget",
    "ErasureAwareSink",
    "ErasureLog",
    "ErasureRecord",
    "MaintenanceConfig",
    "MaintenanceJob",
    "MaintenanceReport",
    "MaintenanceState",
    "MaintenanceStateStore",
    "MemoryMaintenance",
    "MonotonicClock",
    "PersonaRetention",
    "QueueMessage",
    "RetentionPolicy",
    "RetentionPolicySource",
    "TaskName",
    "TaskReport",
    "TranscriptQueue",
    "identity_id",
]
