"""The one settings model. Every value comes from an ``ENGRAM_*`` environment variable.

Nothing here connects to anything; reading settings is cheap and import-safe.
The README's configuration table documents each field.
"""

from __future__ import annotations

from functools import lru_cache
from pathlib import Path
from typing import Literal

from pydantic import AliasChoices, Field, SecretStr
from pydantic_settings import BaseSettings, SettingsConfigDict


class Settings(BaseSettings):
    """Engram configuration (env prefix ``ENGRAM_``)."""

    model_config = SettingsConfigDict(env_prefix="ENGRAM_", extra="ignore", frozen=True)

    # --- general -------------------------------------------------------------------------
    stage: str = "local"
    service_name: str = "engram"
    log_level: str = "INFO"

    # --- Redis (behavioural memory) ------------------------------------------------------
    redis_url: str | None = Field(
        default=None,
        validation_alias=AliasChoices("ENGRAM_REDIS_URL", "REDIS_URL"),
        description="redis:// or rediss:// URL; unset locally means an embedded Redis.",
    )
    redis_username: str | None = None
    redis_password: SecretStr | None = None
    redis_tls: bool = False
    redis_socket_timeout_ms: int = Field(default=250, ge=1, le=10_000)
    redis_connect_timeout_ms: int = Field(default=250, ge=1, le=10_000)
    redis_max_connections: int = Field(default=16, ge=1, le=1024)
    redis_key_prefix: str = Field(default="engram", min_length=1, max_length=32)

    # --- behavioural memory --------------------------------------------------------------
    consolidation_budget_ms: int = Field(default=500, ge=10, le=30_000)
    decay: Literal["exponential", "adaptive"] = "exponential"
    prompt_token_budget: int = Field(default=300, ge=20, le=4000)
    emission_rules_file: Path | None = Field(
        default=None, description="JSON file overriding domain regexes, meta tools, entity rules."
    )
    observation_retention_days: int = Field(default=30, ge=1)
    identity_ttl_days: int = Field(default=90, ge=1, description="Redis key TTL backstop.")

    # --- PostgreSQL (explicit memories) --------------------------------------------------
    database_url: str | None = Field(
        default=None, description="postgresql:// URL; unset locally means embedded PostgreSQL."
    )
    database_secret_arn: str | None = None
    database_connect_timeout_s: int = Field(default=3, ge=1, le=60)
    database_statement_timeout_ms: int = Field(default=2000, ge=10, le=600_000)
    database_pool_min: int = Field(default=0, ge=0)
    database_pool_max: int = Field(default=4, ge=1)
    embedding_dimensions: int = Field(default=1024, ge=2, le=16_000)

    # --- explicit memories ---------------------------------------------------------------
    memory_enabled: bool = True
    memory_hint_max_chars: int = Field(default=6000, ge=200, le=100_000)
    embedder: Literal["none", "bedrock"] = "none"
    bedrock_embedding_model_id: str = "amazon.titan-embed-text-v2:0"
    extractor: Literal["rules", "bedrock"] = "rules"
    bedrock_extraction_model_id: str = "anthropic.claude-3-5-haiku-20241022-v1:0"
    max_memories_per_user: int = Field(default=5000, ge=1)
    extraction_max_tokens: int = Field(default=2048, ge=64, le=32_000)
    extraction_max_receives: int = Field(default=5, ge=1, le=100)
    extraction_batch_size: int = Field(default=10, ge=1, le=100)

    # --- queues --------------------------------------------------------------------------
    ingest_queue_url: str | None = None
    extraction_queue_url: str | None = None
    extraction_dlq_url: str | None = None
    aws_region: str = Field(
        default="us-east-1", validation_alias=AliasChoices("ENGRAM_AWS_REGION", "AWS_REGION")
    )

    # --- identity ------------------------------------------------------------------------
    team_claim: str = "custom:team"
    groups_claim: str = "cognito:groups"
    admin_group: str = "engram-admins"
    team_admin_group: str = "engram-team-admins"
    service_scope: str = "engram/service"
    act_as_header: str = "x-engram-user"

    # --- limits --------------------------------------------------------------------------
    observations_per_minute: int = Field(default=600, ge=1)
    max_body_bytes: int = Field(default=256 * 1024, ge=1024)

    # --- local service -------------------------------------------------------------------
    host: str = "127.0.0.1"
    port: int = Field(default=8000, ge=0, le=65535)
    data_dir: Path = Path(".engram")
    local_audience: str = "engram-local"
    maintenance_interval_s: int = Field(default=60, ge=1)

    # --- scheduled maintenance -----------------------------------------------------------
    maintenance_sweep_idle_days: int = Field(default=7, ge=1)
    maintenance_erasure_settle_days: int = Field(default=14, ge=1)
    maintenance_max_jobs_per_run: int = Field(default=50, ge=1)
    maintenance_safety_margin_ms: int = Field(default=10_000, ge=0)
    maintenance_max_run_ms: int = Field(default=840_000, ge=1000)


@lru_cache(maxsize=1)
def get_settings() -> Settings:
    """Settings read once per process (Lambda execution environment)."""
    return Settings()
