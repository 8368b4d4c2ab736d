"""The cache password rotates for real, and warm clients carry on.

On the session's redis-server and Redis Cluster, under the same ACL as the template: a user of
its own (so the other tests' user keeps its password) whose credentials live in a secret of
moto's Secrets Manager. The rotation function's four steps run as Secrets Manager runs them;
the user's passwords change the way ``ModifyUser`` changes an ElastiCache user's, simulated by
``ACL SETUSER`` (both passwords during the switch, then only the new one). A warm Engram client,
which read the secret before the rotation, is refused on its next new connection, reads the
secret again and succeeds, without a restart.
"""

from __future__ import annotations

import json
import uuid
from collections.abc import Iterator
from typing import Any

import pytest
import redis
from redis.cluster import RedisCluster
from tests.support.aws import CountingSecrets, fake_secrets
from tests.support.observations import observation_factory
from tests.support.services import APP_PREFIX, RedisTarget

from engram.adapters.cache_rotation import (
    CacheSecretRotation,
    RedisAclUserPasswords,
    RotationError,
    redis_login_check,
)
from engram.adapters.redis_acl import access_string
from engram.adapters.redis_behaviour import RedisBehaviourStore
from engram.adapters.redis_client import make_redis
from engram.clock import FakeClock
from engram.settings import Settings

STEPS = ("createSecret", "setSecret", "testSecret", "finishSecret")


def everywhere(target: RedisTarget) -> dict[str, Any]:
    """Options sending an administrative command to every node (each keeps its own ACL)."""
    return {"target_nodes": RedisCluster.ALL_NODES} if target.cluster else {}


@pytest.fixture
def secrets() -> Iterator[CountingSecrets]:
    with fake_secrets() as client:
        yield client


@pytest.fixture
def user(redis_target: RedisTarget) -> Iterator[tuple[str, str]]:
    """A user of its own with Engram's ACL and a first password: (name, password)."""
    name, password = f"rot_{uuid.uuid4().hex[:8]}", uuid.uuid4().hex
    admin = redis_target.admin()
    rules = access_string(APP_PREFIX).split()
    admin.execute_command(
        "ACL", "SETUSER", name, *rules, ">" + password, **everywhere(redis_target)
    )
    yield name, password
    admin.execute_command("ACL", "DELUSER", name, **everywhere(redis_target))
    admin.close()


def url_without_credentials(target: RedisTarget) -> str:
    return "redis://" + target.url.split("@", 1)[1]


def logs_in(target: RedisTarget, username: str, password: str) -> bool:
    client = redis.Redis.from_url(
        url_without_credentials(target), username=username, password=password, socket_timeout=5
    )
    try:
        return bool(client.ping())
    except redis.AuthenticationError:
        return False
    finally:
        client.close()


def rotate(
    rotation: CacheSecretRotation, secrets: CountingSecrets, arn: str, *, stop_after: str = ""
) -> str:
    """What Secrets Manager does on a rotation: the four steps with one version token."""
    token = str(uuid.uuid4())
    for step in STEPS:
        rotation.run(step, arn, token)
        if step == stop_after:
            break
    return token


def test_a_rotation_switches_the_password_and_a_warm_client_reads_it_again(
    redis_target: RedisTarget, secrets: CountingSecrets, user: tuple[str, str]
) -> None:
    username, old = user
    arn = secrets.create_login("engram/test/cache", username, old)
    settings = Settings(
        redis_url=url_without_credentials(redis_target),
        redis_cluster=redis_target.cluster,
        redis_secret_arn=arn,
        secret_max_age_s=3600,  # the cache would keep the old password for an hour
    )
    warm = make_redis(settings, secrets=secrets)  # what a function builds at cold start
    clock = FakeClock()
    make_obs = observation_factory(clock)
    store = RedisBehaviourStore(warm, prefix=APP_PREFIX, clock=clock)
    assert store.append("acme:alice", [make_obs("tool_success", "a", identity="acme:alice")]) == 1
    assert secrets.reads == 1

    admin = redis_target.admin()
    rotation = CacheSecretRotation(
        secrets, RedisAclUserPasswords(admin), login=redis_login_check(settings)
    )
    token = rotate(rotation, secrets, arn, stop_after="testSecret")
    pending = secrets.get_secret_value(SecretId=arn, VersionId=token, VersionStage="AWSPENDING")
    new_password = json.loads(pending["SecretString"])["password"]
    # during the switch the user holds both passwords: nobody is refused
    assert logs_in(redis_target, username, old)
    assert logs_in(redis_target, username, new_password)
    assert secrets.current(arn)["password"] == old

    rotation.run("finishSecret", arn, token)
    assert secrets.current(arn)["password"] == new_password
    assert not logs_in(redis_target, username, old)  # the old password is refused now
    assert logs_in(redis_target, username, new_password)

    # the warm client's connections end (a node restart, an idle timeout): its next command
    # opens a new one with the password it cached, is refused, reads the secret and goes on
    admin.execute_command("CLIENT", "KILL", "USER", username, **everywhere(redis_target))
    reads = secrets.reads
    assert store.append("acme:alice", [make_obs("tool_success", "b", identity="acme:alice")]) == 1
    assert secrets.reads == reads + 1  # read again once, because it was refused
    assert {o.metadata["toolName"] for o in store.since("acme:alice", None)} == {"a", "b"}
    admin.close()
    warm.close()


def test_every_step_is_idempotent_and_a_finished_rotation_leaves_one_password(
    standalone_redis: RedisTarget, secrets: CountingSecrets
) -> None:
    admin = standalone_redis.admin()
    name, old = f"rot_{uuid.uuid4().hex[:8]}", uuid.uuid4().hex
    admin.execute_command("ACL", "SETUSER", name, *access_string(APP_PREFIX).split(), ">" + old)
    arn = secrets.create_login("engram/test/idempotent", name, old)
    rotation = CacheSecretRotation(secrets, RedisAclUserPasswords(admin))
    token = str(uuid.uuid4())
    for step in STEPS:  # Secrets Manager retries a step that failed: twice each
        rotation.run(step, arn, token)
        rotation.run(step, arn, token)
    new = secrets.current(arn)["password"]
    assert new != old
    assert len(admin.acl_getuser(name)["passwords"]) == 1
    assert logs_in(standalone_redis, name, new)
    assert not logs_in(standalone_redis, name, old)
    # a second rotation goes through the same way
    rotate(rotation, secrets, arn)
    assert logs_in(standalone_redis, name, secrets.current(arn)["password"])
    assert not logs_in(standalone_redis, name, new)
    admin.execute_command("ACL", "DELUSER", name)
    admin.close()


def test_a_pending_password_the_cache_refuses_fails_the_test_step(
    standalone_redis: RedisTarget, secrets: CountingSecrets
) -> None:
    class Forgetful:
        def set_passwords(self, username: str, passwords: Any) -> None:
            pass  # the user's passwords never change: the pending one cannot log in

    admin = standalone_redis.admin()
    name, old = f"rot_{uuid.uuid4().hex[:8]}", uuid.uuid4().hex
    admin.execute_command("ACL", "SETUSER", name, *access_string(APP_PREFIX).split(), ">" + old)
    arn = secrets.create_login("engram/test/refused", name, old)
    settings = Settings(redis_url=url_without_credentials(standalone_redis))
    rotation = CacheSecretRotation(secrets, Forgetful(), login=redis_login_check(settings))
    with pytest.raises(RotationError, match="refused"):
        rotate(rotation, secrets, arn)
    assert secrets.current(arn)["password"] == old  # AWSCURRENT never moved
    assert logs_in(standalone_redis, name, old)
    admin.execute_command("ACL", "DELUSER", name)
    admin.close()
