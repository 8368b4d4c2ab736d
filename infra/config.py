"""Typed per-stage configuration.

Every difference between ``dev``, ``staging`` and ``prod`` is a *value* of :class:`StageConfig`;
the stacks read values and never branch on the stage name. A stage is chosen with
``cdk synth -c stage=<name>`` (``make synth STAGE=<name>``).

This module imports no CDK code (only Engram's own settings and Bedrock ids, which connect to
nothing) so it can be validated and unit-tested cheaply.
"""

from __future__ import annotations

from typing import Annotated, Literal

from pydantic import BaseModel, ConfigDict, Field, field_validator, model_validator

from engram import limits
from engram.bedrock_ids import parse_model_id
from engram.settings import Settings

LAMBDA_FUNCTIONS: tuple[str, ...] = (
    "ingest",
    "ingest_consumer",
    "session",
    "memories",
    "maintenance",
    "mcp",
    "events",
)
"""The API/queue/schedule functions; each lives in ``functions/<name>/handler.py``."""

LAMBDA_INVOKE_PAYLOAD_BYTES = 6 * 1024 * 1024
"""Lambda's synchronous invoke payload limit, which an SQS event source's batch stays under."""
SQS_RECORD_FIELDS_BYTES = 1024
"""About what one SQS record adds around its body in the event (ids, receipt, attributes)."""

CACHE_ROTATION_FUNCTION = "rotate_cache"
"""The rotation function of the cache secret (``functions/rotate_cache/handler.py``), invoked
by Secrets Manager only."""

TeamId = Annotated[str, Field(pattern=r"^[A-Za-z0-9][A-Za-z0-9_.-]{0,63}$")]
"""A team id that can be part of a Cognito scope name (``engram/team.<team>``)."""

AvailabilityZone = Annotated[str, Field(pattern=r"^[a-z]{2}(-[a-z]+)+-\d+[a-z]$")]
"""An Availability Zone name such as ``eu-west-1a`` (its region is the name without the letter)."""


ConsoleUrl = Annotated[
    str, Field(pattern=r"^(https://[A-Za-z0-9.-]+(:\d+)?|http://localhost(:\d+)?)(/[^\s*]*)?$")
]
"""An extra callback or sign-out URL of the web client: https, or http on localhost only (what
Cognito accepts); no wildcard."""


class FunctionConfig(BaseModel):
    """Sizing of one Lambda function."""

    model_config = ConfigDict(frozen=True, extra="forbid")

    memory_mb: int = Field(default=512, ge=128, le=10_240)
    timeout_s: int = Field(default=10, ge=1, le=900)


class StageConfig(BaseModel):
    """Everything that differs between stages. Defaults are the smallest sensible values."""

    model_config = ConfigDict(frozen=True, extra="forbid")

    name: str = Field(pattern=r"^[a-z][a-z0-9-]{1,15}$")
    # --- data protection -----------------------------------------------------------------
    retain_data: bool = Field(
        default=False, description="Keep Aurora, the cache, secrets and the user pool on delete."
    )
    retain_logs: bool = Field(
        default=False,
        description="Keep the log groups (functions, API access, flow logs, PostgreSQL) on delete.",
    )
    deletion_protection: bool = False
    backup_retention_days: int = Field(default=1, ge=1, le=35)
    cache_snapshot_retention_days: int = Field(default=0, ge=0, le=35)
    log_retention_days: int = Field(default=7, ge=1)
    # --- capacity ------------------------------------------------------------------------
    max_azs: int = Field(
        default=2,
        ge=2,
        le=3,
        description="AZs for subnets when availability_zones is empty: the region's first "
        "max_azs (Fn::GetAZs); env-agnostic stacks (no account/region) resolve at most 2.",
    )
    availability_zones: tuple[AvailabilityZone, ...] = Field(
        default=(),
        description="The AZs of the subnets (and so of the interface endpoints, the proxy and "
        "the cache), by name, all in the region deployed to; empty: see max_azs.",
    )
    # RDS Proxy keeps connections to the writer open, so an auto-paused (0 ACU) writer is not
    # supported behind it: 0.5 is the floor.
    aurora_min_acu: float = Field(default=0.5, ge=0.5, le=256)
    aurora_max_acu: float = Field(default=2, ge=1, le=256)
    aurora_readers: int = Field(default=0, ge=0, le=15)
    cache_max_data_gb: int = Field(default=1, ge=1, le=5000)
    cache_max_ecpu_per_second: int = Field(default=5000, ge=1000, le=15_000_000)
    functions: dict[str, FunctionConfig] = Field(
        default_factory=lambda: {
            "ingest": FunctionConfig(memory_mb=512, timeout_s=10),
            "ingest_consumer": FunctionConfig(memory_mb=512, timeout_s=30),
            "session": FunctionConfig(memory_mb=1024, timeout_s=10),
            "memories": FunctionConfig(memory_mb=1024, timeout_s=15),
            "maintenance": FunctionConfig(memory_mb=1024, timeout_s=300),
            # within API Gateway's 30 s integration timeout (its tools call the API)
            "mcp": FunctionConfig(memory_mb=512, timeout_s=29),
            "events": FunctionConfig(memory_mb=256, timeout_s=90),
        }
    )
    migration_timeout_s: int = Field(
        default=600,
        ge=60,
        le=900,
        description="Timeout of the deploy-time migration; it retries connecting (RDS Proxy "
        "targets can take minutes to become available on a first deploy) within it.",
    )
    maintenance_reserved_concurrency: int | None = Field(
        default=None,
        ge=1,
        le=1000,
        description="Reserved concurrency of the maintenance function; None reserves nothing "
        "(runs are serialised by a lease in Redis, not by concurrency).",
    )
    maintenance_retry_attempts: int = Field(
        default=2, ge=0, le=2, description="Lambda's retries of a failed maintenance invocation."
    )
    maintenance_max_event_age_s: int = Field(
        default=3600,
        ge=60,
        le=21_600,
        description="A maintenance event older than this is not run but sent to the failure "
        "queue (a later scheduled run covers its work).",
    )
    # --- queues --------------------------------------------------------------------------
    ingest_batch_size: int = Field(default=50, ge=1, le=10_000)
    ingest_batch_window_s: int = Field(default=1, ge=0, le=300)
    ingest_max_concurrency: int = Field(
        default=5, ge=2, le=1000, description="SQS event source maximum concurrency."
    )
    max_receive_count: int = Field(default=5, ge=5, le=1000)
    dlq_retention_days: int = Field(default=14, ge=1, le=14)
    visibility_timeout_factor: int = Field(
        default=6,
        ge=6,
        description="Queue visibility timeout = factor x consumer timeout (+ the ingest "
        "queue's batching window).",
    )
    ingest_max_message_bytes: int = Field(
        default=limits.DEFAULT_QUEUE_MESSAGE_BYTES,
        ge=limits.MIN_QUEUE_MESSAGE_BYTES,
        le=limits.MAX_QUEUE_MESSAGE_BYTES,
        description="The ingest queue's (and its DLQ's) MaximumMessageSize; the ingest "
        "function splits a request's observations into messages of at most this size.",
    )
    # --- schedules -----------------------------------------------------------------------
    maintenance_every_minutes: int = Field(default=5, ge=1, le=1440)
    daily_sweep_hour_utc: int = Field(default=3, ge=0, le=23)
    cache_rotation_days: int = Field(
        default=30,
        ge=1,
        le=365,
        description="Days between rotations of the cache password (the first runs when the "
        "schedule is created).",
    )
    # --- domain events -------------------------------------------------------------------
    events_every_minutes: int = Field(
        default=1, ge=1, le=60, description="Schedule of the events function (the relay)."
    )
    events_relay_run_s: int = Field(
        default=50,
        ge=0,
        le=840,
        description="Seconds one run of the events function keeps polling the outbox; with a "
        "1-minute schedule, 50 keeps a relay polling almost all the time.",
    )
    event_archive_retention_days: int = Field(
        default=30, ge=1, le=3650, description="Days the bus's archive keeps events for replay."
    )
    alarm_outbox_age_s: int = Field(
        default=300, ge=60, description="Oldest unpublished event in the outbox, above which."
    )
    alarm_outbox_depth: int = Field(
        default=10_000, ge=1, description="Events waiting in the outbox, above which."
    )
    # --- API -----------------------------------------------------------------------------
    api_throttle_rate: float = Field(default=50, gt=0)
    api_throttle_burst: int = Field(default=100, ge=1)
    cors_allowed_origins: tuple[str, ...] = ()
    domain_name: str | None = None
    certificate_arn: str | None = None
    # --- console -------------------------------------------------------------------------
    console_callback_urls: tuple[ConsoleUrl, ...] = Field(
        default=(),
        description="Sign-in callback URLs of the web client besides the console's own "
        "(https://<distribution>/callback), e.g. a developer's http://localhost:5173/callback.",
    )
    console_logout_urls: tuple[ConsoleUrl, ...] = Field(
        default=(),
        description="Sign-out URLs of the web client besides the console's own "
        "(https://<distribution>/).",
    )
    console_price_class: Literal["PRICE_CLASS_100", "PRICE_CLASS_200", "PRICE_CLASS_ALL"] = Field(
        default="PRICE_CLASS_100",
        description="The CloudFront edge locations that serve the console (and its /v1 calls).",
    )
    # --- identity ------------------------------------------------------------------------
    mfa: Literal["OPTIONAL", "REQUIRED"] = "OPTIONAL"
    threat_protection: Literal["AUDIT", "ENFORCED"] = "AUDIT"
    cognito_domain_prefix: str | None = Field(
        default=None, description="Hosted domain for the token endpoint; default engram-<stage>."
    )
    service_teams: tuple[TeamId, ...] = Field(
        default=(),
        description="Teams with a machine client: each gets the scope engram/team.<team> and "
        "its own client-credentials app client (service + team scopes).",
    )
    # --- application settings passed as ENGRAM_* env vars ---------------------------------
    embedder: Literal["none", "bedrock"] = "bedrock"
    embedding_dimensions: int = Field(default=1024, ge=2, le=16_000)
    extractor: Literal["rules", "bedrock"] = "bedrock"
    # Model or cross-region inference profile ids (``us.``/``eu.``/… in front), as the
    # settings take them; the defaults are the settings' own. Claude is invoked through a
    # profile in most regions: a stage outside the US names its geography's profile.
    bedrock_embedding_model_id: str = Settings.model_fields["bedrock_embedding_model_id"].default
    bedrock_extraction_model_id: str = Settings.model_fields["bedrock_extraction_model_id"].default
    log_level: str = "INFO"
    tracing: bool = True
    # --- monitoring ----------------------------------------------------------------------
    alarm_email: str | None = None
    alarm_error_threshold: int = Field(default=5, ge=1)
    alarm_p99_fraction_of_timeout: float = Field(default=0.8, gt=0, le=1)
    alarm_degraded_threshold: int = Field(default=10, ge=1)
    alarm_api_5xx_threshold: int = Field(
        default=5, ge=1, description="HTTP API 5xx responses per 5 minutes."
    )
    alarm_api_latency_p99_ms: int = Field(
        default=3000, ge=100, description="HTTP API p99 latency (integration included)."
    )
    alarm_aurora_acu_utilization_percent: float = Field(
        default=90, gt=0, le=100, description="Aurora ACUUtilization (percent of the maximum)."
    )
    alarm_database_connections: int = Field(
        default=200, ge=1, description="Connections to the Aurora writer (DatabaseConnections)."
    )
    alarm_proxy_availability_percent: float = Field(
        default=99, gt=0, le=100, description="RDS Proxy target availability, below which."
    )
    alarm_cache_throttled_commands: int = Field(
        default=1, ge=1, description="ElastiCache ThrottledCmds per 5 minutes."
    )

    @field_validator("bedrock_embedding_model_id", "bedrock_extraction_model_id")
    @classmethod
    def _bedrock_model_id(cls, value: str) -> str:
        parse_model_id(value)
        return value

    @model_validator(mode="after")
    def _consistent(self) -> StageConfig:
        missing = set(LAMBDA_FUNCTIONS) - set(self.functions)
        if missing:
            raise ValueError(f"functions: missing sizing for {sorted(missing)}")
        if self.events_relay_run_s + 10 > self.function("events").timeout_s:
            raise ValueError("events_relay_run_s: must end 10 s before the events timeout")
        if self.aurora_max_acu < self.aurora_min_acu:
            raise ValueError("aurora_max_acu: must be >= aurora_min_acu")
        if self.ingest_batch_size > 10 and self.ingest_batch_window_s < 1:
            raise ValueError("ingest_batch_window_s: must be >= 1 when ingest_batch_size > 10")
        if (self.domain_name is None) != (self.certificate_arn is None):
            raise ValueError("domain_name: set together with certificate_arn, or neither")
        if len(set(self.service_teams)) != len(self.service_teams):
            raise ValueError("service_teams: each team at most once")
        azs = self.availability_zones
        if azs:
            if not 2 <= len(azs) <= 3 or len(set(azs)) != len(azs):
                raise ValueError("availability_zones: two or three distinct AZs")
            if len({az.rstrip("abcdefghijklmnopqrstuvwxyz") for az in azs}) != 1:
                raise ValueError("availability_zones: all in one region")
        return self

    def function(self, name: str) -> FunctionConfig:
        return self.functions[name]

    @property
    def uses_bedrock(self) -> bool:
        """Whether any function calls Bedrock (the embedder or the extractor)."""
        return self.embedder == "bedrock" or self.extractor == "bedrock"

    @property
    def ingest_visibility_timeout_s(self) -> int:
        """AWS's rule for a queue that drives a function: at least six times the function's
        timeout plus the batching window."""
        consumer = self.function("ingest_consumer").timeout_s
        return self.visibility_timeout_factor * consumer + self.ingest_batch_window_s

    @property
    def ingest_messages_per_invoke(self) -> int:
        """The most messages one consumer invoke gets: the batch size, or fewer when that many
        of the largest messages (with ~1 KiB of record fields each) would pass Lambda's 6 MB
        invoke payload limit (the event source mapping then sends a smaller batch)."""
        fit = LAMBDA_INVOKE_PAYLOAD_BYTES // (
            self.ingest_max_message_bytes + SQS_RECORD_FIELDS_BYTES
        )
        return min(self.ingest_batch_size, fit)

    @property
    def extraction_visibility_timeout_s(self) -> int:
        return self.visibility_timeout_factor * self.function("maintenance").timeout_s


STAGES: dict[str, StageConfig] = {
    "dev": StageConfig(
        name="dev",
        embedder="none",
        extractor="rules",
        log_level="DEBUG",
        service_teams=("dev",),
        events_relay_run_s=0,  # publish once a minute, without polling: events within 60 s
    ),
    "staging": StageConfig(
        name="staging",
        backup_retention_days=7,
        log_retention_days=30,
        aurora_max_acu=8,
        cache_max_data_gb=5,
        ingest_max_concurrency=10,
    ),
    "prod": StageConfig(
        name="prod",
        retain_data=True,
        retain_logs=True,
        deletion_protection=True,
        backup_retention_days=30,
        cache_snapshot_retention_days=7,
        log_retention_days=365,
        aurora_min_acu=1,
        aurora_max_acu=32,
        aurora_readers=1,
        cache_max_data_gb=20,
        cache_max_ecpu_per_second=100_000,
        ingest_max_concurrency=50,
        api_throttle_rate=500,
        api_throttle_burst=1000,
        mfa="REQUIRED",
        threat_protection="ENFORCED",
        alarm_error_threshold=10,
    ),
}


def stage_config(name: str) -> StageConfig:
    """The config of a named stage; a clear error naming the valid stages otherwise."""
    try:
        return STAGES[name]
    except KeyError:
        valid = ", ".join(sorted(STAGES))
        raise ValueError(f"stage: unknown stage {name!r}; expected one of {valid}") from None
