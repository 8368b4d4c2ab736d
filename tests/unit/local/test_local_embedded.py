"""The embedded Redis: one in-process server per process, with Lua."""

from __future__ import annotations

import pytest

from engram.adapters.embedded import lua_available, redis_client
from engram.settings import Settings


def test_embedded_redis_is_shared_and_runs_lua(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.delenv("REDIS_URL", raising=False)
    monkeypatch.delenv("ENGRAM_REDIS_URL", raising=False)
    settings = Settings()
    assert settings.redis_url is None
    a = redis_client(settings)
    b = redis_client(settings, decode_responses=True)
    a.set("engram-test:{x}:k", "v")
    assert b.get("engram-test:{x}:k") == "v"
    script = "redis.call('INCRBY', KEYS[1], ARGV[1]); return redis.call('GET', KEYS[1])"
    assert b.eval(script, 1, "engram-test:{x}:n", 5) == "5"
    sha = b.script_load(script)
    assert b.evalsha(sha, 1, "engram-test:{x}:n", 2) == "7"
    assert lua_available()
    b.delete("engram-test:{x}:k", "engram-test:{x}:n")
