"""Models of the maintenance job: configuration, its inputs, its persisted state and its report.

All pydantic v2; the state and the report serialise as camelCase JSON.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Annotated, Any, Literal

from pydantic import BaseModel, ConfigDict, Field
from pydantic.alias_generators import to_camel

from engram import limits
from engram.clock import MS_PER_DAY
from engram.extraction.models import TranscriptJob

FREQUENT = "frequent"
"""The frequent schedule: every task but retention (see ``engram.bootstrap.maintenance``)."""
DAILY = "daily"
"""The daily schedule: every task. So is any other (the local timer sends none)."""

TaskName = Literal["prune", "sweep", "retention", "erasure", "extraction", "insights", "embeddings"]
TASK_ORDER: tuple[TaskName, ...] = (
    "prune",
    "sweep",
    "retention",
    "erasure",
    "extraction",
    "insights",
    "embeddings",
)

PositiveInt = Annotated[int, Field(ge=1)]


class _Camel(BaseModel):
    model_config = ConfigDict(alias_generator=to_camel, populate_by_name=True, extra="forbid")


class MaintenanceConfig(_Camel):
    """Knobs of one run. Every per-task ``max_*`` bounds the work of that task in one run, so
    that no task can starve the others; the time budget is the safety net above them."""

    model_config = ConfigDict(
        alias_generator=to_camel, populate_by_name=True, extra="forbid", frozen=True
    )

    observation_retention_days: PositiveInt = 30
    sweep_idle_days: PositiveInt = 7
    erasure_settle_days: PositiveInt = 14
    page_size: Annotated[int, Field(ge=1, le=1000)] = 100
    max_identities_per_run: PositiveInt = 5000
    max_swept_per_run: PositiveInt = 5000
    max_policies_per_run: PositiveInt = 500
    max_erasures_per_run: PositiveInt = 500
    max_jobs_per_run: Annotated[int, Field(ge=0)] = 50
    receive_batch: Annotated[int, Field(ge=1, le=10)] = 10
    max_receives: Annotated[int, Field(ge=1, le=100)] = 5
    retry_base_delay_s: Annotated[int, Field(ge=0, le=43_200)] = 30
    retry_max_delay_s: Annotated[int, Field(ge=0, le=43_200)] = 900
    safety_margin_ms: Annotated[int, Field(ge=0)] = 10_000
    max_run_ms: PositiveInt = 14 * 60 * 1000
    insights_min_users: PositiveInt = 5
    max_insight_identities_per_run: PositiveInt = 50_000
    embedding_batch: Annotated[int, Field(ge=1, le=10_000)] = 200
    #: memory versions kept after they stopped being current (None: until erasure)
    history_retention_days: PositiveInt | None = 365
    max_versions_purged_per_run: PositiveInt = 50_000

    @property
    def retention_ms(self) -> int:
        return self.observation_retention_days * MS_PER_DAY

    @property
    def idle_ms(self) -> int:
        return self.sweep_idle_days * MS_PER_DAY

    @property
    def settle_ms(self) -> int:
        return self.erasure_settle_days * MS_PER_DAY

    def retry_delay_s(self, receive_count: int) -> int:
        """Back-off before a failed extraction job is received again."""
        exponent = min(max(receive_count, 1) - 1, 20)
        return int(min(self.retry_max_delay_s, self.retry_base_delay_s * 2**exponent))


class RetentionPolicy(_Camel):
    """Memory retention of one team (``persona_id`` None) or one persona of a team.

    ``None`` days mean "never" for that rule."""

    model_config = ConfigDict(
        alias_generator=to_camel, populate_by_name=True, extra="forbid", frozen=True
    )

    team_id: str = Field(min_length=1, max_length=limits.MAX_ID_CHARS)
    persona_id: str | None = Field(default=None, min_length=1, max_length=limits.MAX_ID_CHARS)
    archive_after_days: PositiveInt | None = None
    delete_archived_after_days: PositiveInt | None = None

    @property
    def key(self) -> str:
        """Sort and resume key of the policy (``team/persona``)."""
        return f"{self.team_id}/{self.persona_id or ''}"


class ErasureRecord(_Camel):
    """One erasure (``DELETE /v1/me``) as the erasure log keeps it."""

    model_config = ConfigDict(
        alias_generator=to_camel, populate_by_name=True, extra="forbid", frozen=True
    )

    team_id: str = Field(min_length=1, max_length=limits.MAX_ID_CHARS)
    user_id: str = Field(min_length=1, max_length=limits.MAX_ID_CHARS)
    erased_at_ms: int = Field(ge=0)

    @property
    def key(self) -> tuple[int, str, str]:
        """Order of ``ErasureLog.pending_purges`` (oldest erasure first)."""
        return (self.erased_at_ms, self.team_id, self.user_id)


@dataclass(frozen=True)
class QueueMessage:
    """One received extraction-queue message. ``receive_count`` counts this receive too
    (SQS ApproximateReceiveCount); ``body`` is the raw JSON text or an already-parsed job."""

    message_id: str
    receipt: str
    receive_count: int
    body: str | TranscriptJob


# --- persisted state --------------------------------------------------------------------------


class OffsetCursor(_Camel):
    """Position in the identity index (an offset, as ``list_identities`` pages) and how many
    full passes over the index have completed."""

    cursor: int = Field(default=0, ge=0)
    cycle: int = Field(default=0, ge=0)


class PolicyCursor(_Camel):
    after: str | None = None
    cycle: int = Field(default=0, ge=0)


class InsightsCursor(_Camel):
    """Position of the insights aggregation in the identity index (a keyset cursor, ``""``
    at the start) and the number of the aggregation in progress."""

    cursor: str = ""
    cycle: int = Field(default=0, ge=0)


class ErasureCursor(_Camel):
    after: tuple[int, str, str] | None = None
    cycle: int = Field(default=0, ge=0)


class MaintenanceState(_Camel):
    """What survives between runs (a small JSON document in ``MaintenanceStateStore``)."""

    version: Literal[1] = 1
    next_task: TaskName = "prune"
    prune: OffsetCursor = Field(default_factory=OffsetCursor)
    sweep: OffsetCursor = Field(default_factory=OffsetCursor)
    retention: PolicyCursor = Field(default_factory=PolicyCursor)
    erasure: ErasureCursor = Field(default_factory=ErasureCursor)
    insights: InsightsCursor = Field(default_factory=InsightsCursor)
    runs: int = Field(default=0, ge=0)

    def to_json_dict(self) -> dict[str, Any]:
        return self.model_dump(mode="json", by_alias=True)


# --- report -----------------------------------------------------------------------------------


class TaskReport(_Camel):
    """What one task did in one run.

    ``completed_cycle``: the task reached the end of its list (identity index, policies,
    pending erasures; for extraction: the queue answered empty). ``cut_off``: the time budget
    stopped it; ``paused``: its per-run cap stopped it. ``error``: a dependency failed; the
    cursor stays before the item that failed, so the next run retries it."""

    name: TaskName
    ran: bool = False
    counts: dict[str, int] = Field(default_factory=dict)
    completed_cycle: bool = False
    cut_off: bool = False
    paused: bool = False
    error: str | None = None

    def add(self, name: str, n: int = 1) -> None:
        self.counts[name] = self.counts.get(name, 0) + n


class MaintenanceReport(_Camel):
    """The result of one run, for logs and EMF metrics (see :meth:`metrics`)."""

    started_at_ms: int
    finished_at_ms: int
    cut_off: bool = False
    tasks: dict[str, TaskReport] = Field(default_factory=dict)
    state: MaintenanceState
    state_reset: bool = False

    @property
    def errors(self) -> int:
        return sum(1 for t in self.tasks.values() if t.error is not None)

    def metrics(self) -> dict[str, int]:
        """Flat metric name -> value: ``<Task><Count>`` for every count (e.g.
        ``PruneObservationsPruned``), plus ``CutOff``, ``Errors`` and ``<Task>CycleCompleted``."""
        out: dict[str, int] = {"CutOff": int(self.cut_off), "Errors": self.errors}
        for name, task in self.tasks.items():
            prefix = name[:1].upper() + name[1:]
            for count, value in task.counts.items():
                out[prefix + count[:1].upper() + count[1:]] = value
            out[f"{prefix}CycleCompleted"] = int(task.completed_cycle)
        return out
