"""`engram demo` runs on the embedded Redis; the Redis client fits the 500 ms budget."""

from __future__ import annotations

import pytest
import redis
from pydantic import SecretStr

from engram import demo
from engram.adapters.redis_client import make_redis, redis_options
from engram.settings import Settings


def test_demo_runs_on_the_embedded_redis(
    monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]
) -> None:
    monkeypatch.delenv("REDIS_URL", raising=False)
    monkeypatch.delenv("ENGRAM_REDIS_URL", raising=False)
    assert demo.main([]) == 0
    out = capsys.readouterr().out
    assert "embedded Redis" in out
    assert "=== day 2: session start ===" in out
    assert "## What you know about this user" in out
    assert "tool_affinity:run_royalty_report" in out
    assert "tool affinities:" in out
    assert "degraded" not in out


def test_client_options_fit_the_budget() -> None:
    opts = redis_options(Settings(redis_url="redis://cache:6379/0"))
    assert opts["socket_timeout"] == 0.25
    assert opts["socket_connect_timeout"] == 0.25
    assert opts["retry_on_timeout"] is False
    assert opts["health_check_interval"] > 0
    client = make_redis(Settings(redis_url="redis://cache:6379/0"))
    assert client.connection_pool.connection_kwargs["retry"].get_retries() <= 1


def test_client_tls_and_auth_for_elasticache() -> None:
    settings = Settings(
        redis_url="redis://cache.example:6379/0",
        redis_tls=True,
        redis_username="engram",
        redis_password=SecretStr("s3cret"),
    )
    client = make_redis(settings)  # connects lazily: nothing happens here
    pool = client.connection_pool
    assert issubclass(pool.connection_class, redis.SSLConnection)
    assert pool.connection_kwargs["username"] == "engram"
    assert pool.connection_kwargs["password"] == "s3cret"
    rediss = make_redis(Settings(redis_url="rediss://cache.example:6379/0"))
    assert issubclass(rediss.connection_pool.connection_class, redis.SSLConnection)
