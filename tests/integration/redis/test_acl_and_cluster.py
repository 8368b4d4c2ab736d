"""Engram's ACL and its cluster client, on a real redis-server and a real 3-shard Redis Cluster.

Every test server has the same user as the template's ElastiCache user
(``engram.adapters.redis_acl.access_string``), and the whole Redis tier runs as that user; here
the ACL is shown to refuse what Engram must never do, and the cluster client to place an
identity's keys on one slot while the identities spread over every shard.
"""

from __future__ import annotations

import uuid
from typing import Any

import pytest
import redis
from redis.cluster import RedisCluster
from redis.crc import key_slot
from tests.support.observations import MakeObs, observation_factory
from tests.support.services import APP_PREFIX, RedisTarget

from engram.adapters.redis_acl import access_string, key_pattern
from engram.adapters.redis_behaviour import RedisBehaviourStore
from engram.adapters.redis_client import LazyRedisCluster, is_cluster, make_redis
from engram.bootstrap import Container
from engram.clock import FakeClock
from engram.identity import Caller
from engram.settings import Settings
from engram.use_cases.session import SessionService

REFUSED = redis.exceptions.NoPermissionError


@pytest.fixture
def app(redis_target: RedisTarget) -> Any:
    """Engram's own client, as the service builds it (``make_redis``)."""
    client = make_redis(Settings(**redis_target.settings()))
    yield client
    client.close()


def test_the_acl_grants_the_prefix_and_the_commands_engram_uses_only() -> None:
    rules = access_string("engram").split()
    assert rules[:3] == ["on", "~engram:*", "-@all"]
    assert not {"~*", "+@all", "&*", "allkeys", "allcommands"} & set(rules)
    assert "-@dangerous" in rules
    assert not any(r.startswith(">") or r in ("nopass", "reset") for r in rules)  # no password
    with pytest.raises(ValueError, match="prefix"):
        key_pattern("engram*")


@pytest.mark.parametrize(
    ("command", "args"),
    [
        ("FLUSHALL", ()),
        ("FLUSHDB", ()),
        ("KEYS", ("*",)),
        ("CONFIG", ("GET", "maxmemory")),
        ("CONFIG", ("SET", "maxmemory", "1")),
        ("SCAN", ("0",)),
        ("RANDOMKEY", ()),
        ("SHUTDOWN", ()),
        ("SCRIPT", ("FLUSH",)),
        ("CLIENT", ("KILL", "ID", "1")),
        ("ACL", ("WHOAMI",)),
        ("MONITOR", ()),
        ("FUNCTION", ("FLUSH",)),
        ("FUNCTION", ("LOAD", "#!lua name=x\nredis.register_function('f', function() end)")),
    ],
)
def test_destructive_and_listing_commands_are_refused(
    redis_target: RedisTarget, command: str, args: tuple[str, ...]
) -> None:
    client = redis.Redis.from_url(redis_target.url, socket_timeout=5)  # one node, as the user
    try:
        with pytest.raises(REFUSED):
            client.execute_command(command, *args)
    finally:
        client.close()
    assert redis_target.key_names() == []  # nothing happened either


def test_keys_outside_the_prefix_are_refused_in_commands_and_in_scripts(app: Any) -> None:
    app.set(f"{APP_PREFIX}:mine", "1")
    assert app.get(f"{APP_PREFIX}:mine") == b"1"
    for key in ("other:key", "engram", "engramx:key", "{engram}:key"):
        with pytest.raises(REFUSED):
            app.set(key, "1")
        with pytest.raises(REFUSED):
            app.get(key)
        with pytest.raises(REFUSED):  # a script's keys are checked too ...
            app.eval("return redis.call('GET', KEYS[1])", 1, key)
    with pytest.raises(redis.ResponseError, match="can't access"):
        # ... and so is a key a script makes up on its own
        app.eval("return redis.call('SET', 'elsewhere', ARGV[1])", 1, f"{APP_PREFIX}:x", "1")


def test_the_administrator_sees_that_nothing_leaked(redis_target: RedisTarget, app: Any) -> None:
    store = RedisBehaviourStore(app, prefix=APP_PREFIX, clock=FakeClock())
    make_obs = observation_factory(FakeClock())
    store.append("acme:alice", [make_obs("tool_success", "a", identity="acme:alice")])
    assert redis_target.key_names()  # the administrator lists keys ...
    assert all(k.startswith(f"{APP_PREFIX}:".encode()) for k in redis_target.key_names())


def test_make_redis_speaks_the_protocol_the_settings_name(redis_target: RedisTarget) -> None:
    client = make_redis(Settings(**redis_target.settings()))
    try:
        assert is_cluster(client) is redis_target.cluster
        assert client.ping()
    finally:
        client.close()


def test_the_cluster_client_is_built_on_first_use_and_a_dead_cluster_is_a_connection_error() -> (
    None
):
    settings = Settings(
        redis_url="redis://127.0.0.1:1/0",
        redis_cluster=True,
        redis_connect_timeout_ms=100,
        redis_socket_timeout_ms=100,
    )
    client: Any = make_redis(settings)  # nothing connects here
    assert isinstance(client, LazyRedisCluster)
    with pytest.raises(redis.ConnectionError, match="Redis Cluster unreachable"):
        client.get(f"{APP_PREFIX}:k")
    with pytest.raises(ValueError, match="database 0"):
        make_redis(Settings(redis_url="redis://127.0.0.1:1/3", redis_cluster=True))


def test_a_cold_start_with_the_cluster_down_degrades_the_session() -> None:
    settings = Settings(
        redis_url="redis://127.0.0.1:1/0",
        redis_cluster=True,
        redis_connect_timeout_ms=100,
        redis_socket_timeout_ms=100,
    )
    behaviour = Container(settings).behaviour  # the store is built; nothing connected
    sessions = SessionService(behaviour, None)  # the behavioural half only
    try:
        context = sessions.start(Caller(user_id="alice", team_id="acme"))
        assert context.behaviour_degraded
        assert context.facts == []
    finally:
        sessions.close()


def test_identities_spread_over_every_shard_and_each_stays_on_one_slot(
    cluster_redis: RedisTarget, make_obs: MakeObs
) -> None:
    client: RedisCluster = cluster_redis.client()
    store = RedisBehaviourStore(client, prefix=APP_PREFIX, clock=FakeClock())
    identities = [f"team:{uuid.uuid4().hex[:8]}" for _ in range(24)]
    for identity in identities:
        store.append(identity, [make_obs("tool_success", "t", identity=identity)])
        store.delete_fact(identity, "fact:none")
    nodes = set()
    for identity in identities:
        keys = [k for k in cluster_redis.key_names() if f"{{{identity}}}".encode() in k]
        assert len(keys) >= 3
        assert len({key_slot(k) for k in keys}) == 1
        nodes.add(client.get_node_from_key(keys[0]).name)
    assert len(nodes) == 3  # 24 random identities on 3 shards: each holds some
    client.close()


@pytest.fixture
def make_obs() -> MakeObs:
    return observation_factory(FakeClock())
