"""The typed stage config: stage differences are values, validated with the field named."""

from __future__ import annotations

import pytest
from infra.config import STAGES, StageConfig, stage_config
from pydantic import ValidationError

pytestmark = pytest.mark.infrastructure


def test_the_three_stages_exist_and_prod_protects_its_data() -> None:
    assert set(STAGES) == {"dev", "staging", "prod"}
    prod = stage_config("prod")
    assert prod.retain_data
    assert prod.deletion_protection
    assert not stage_config("dev").retain_data


def test_unknown_stage_names_the_valid_ones() -> None:
    with pytest.raises(ValueError, match=r"stage: unknown stage 'qa'; expected one of dev, prod"):
        stage_config("qa")


@pytest.mark.parametrize(
    ("field", "value"),
    [
        ("max_receive_count", 4),
        ("visibility_timeout_factor", 5),
        ("ingest_max_concurrency", 1),
        ("aurora_min_acu", -1),
    ],
)
def test_unsafe_values_are_rejected_naming_the_field(field: str, value: object) -> None:
    with pytest.raises(ValidationError) as error:
        StageConfig.model_validate({"name": "dev", field: value})
    assert error.value.errors()[0]["loc"] == (field,)


def test_cross_field_rules() -> None:
    with pytest.raises(ValidationError, match="aurora_max_acu"):
        StageConfig(name="dev", aurora_min_acu=8, aurora_max_acu=4)
    with pytest.raises(ValidationError, match="certificate_arn"):
        StageConfig(name="dev", domain_name="api.example.com")
    with pytest.raises(ValidationError, match="ingest_batch_window_s"):
        StageConfig(name="dev", ingest_batch_size=100, ingest_batch_window_s=0)


def test_visibility_timeouts_follow_the_consumers() -> None:
    for config in STAGES.values():
        consumer = config.function("ingest_consumer").timeout_s
        window = config.ingest_batch_window_s
        assert config.ingest_visibility_timeout_s >= 6 * consumer + window
        assert (
            config.extraction_visibility_timeout_s >= 6 * config.function("maintenance").timeout_s
        )


@pytest.mark.parametrize("team", ["", "a b", "acme/eu", "-acme", "x" * 65, 'qu"ote'])
def test_service_teams_must_fit_a_cognito_scope_name(team: str) -> None:
    with pytest.raises(ValidationError) as error:
        StageConfig(name="dev", service_teams=(team,))
    assert error.value.errors()[0]["loc"][0] == "service_teams"


def test_service_teams_are_unique() -> None:
    with pytest.raises(ValidationError, match="service_teams"):
        StageConfig(name="dev", service_teams=("acme", "acme"))
    assert StageConfig(name="dev", service_teams=("acme", "acme-eu.2")).service_teams == (
        "acme",
        "acme-eu.2",
    )


def test_ingest_batches_stay_under_lambdas_invoke_payload() -> None:
    for config in STAGES.values():
        per_invoke = config.ingest_messages_per_invoke
        assert 1 <= per_invoke <= config.ingest_batch_size
        assert per_invoke * (config.ingest_max_message_bytes + 1024) <= 6 * 1024 * 1024
    big = StageConfig(name="dev", ingest_batch_size=100, ingest_max_message_bytes=1024 * 1024)
    assert big.ingest_messages_per_invoke == 5  # 6 MB / (1 MiB + 1 KiB)
    assert StageConfig(name="dev").ingest_messages_per_invoke == 23  # 256 KiB messages: not 50
    with pytest.raises(ValidationError, match="ingest_max_message_bytes"):
        StageConfig(name="dev", ingest_max_message_bytes=2 * 1024 * 1024)
    with pytest.raises(ValidationError, match="ingest_max_message_bytes"):
        StageConfig(name="dev", ingest_max_message_bytes=1024)


@pytest.mark.parametrize(
    "url",
    ["https://console.example.com/callback", "http://localhost:5173/callback", "http://localhost/"],
)
def test_extra_console_urls_accept_https_and_localhost(url: str) -> None:
    config = StageConfig(name="t1", console_callback_urls=(url,), console_logout_urls=(url,))
    assert config.console_callback_urls == (url,)


@pytest.mark.parametrize(
    "url", ["http://console.example.com/callback", "https://*.example.com/", "ftp://x/"]
)
def test_extra_console_urls_refuse_plain_http_and_wildcards(url: str) -> None:
    with pytest.raises(ValidationError, match="console_callback_urls"):
        StageConfig(name="t1", console_callback_urls=(url,))
