"""Rotation of the cache user's password, as Secrets Manager drives it and ElastiCache allows.

The secret (JSON ``username`` + ``password``) rotates in Secrets Manager's four steps; the
user's passwords change alongside, the way ElastiCache RBAC allows it (a user holds at most two
passwords; ``ModifyUser`` sets them):

1. ``createSecret``: a new random password is stored as the ``AWSPENDING`` version.
2. ``setSecret``: the user gets both passwords, current and pending. Every client logs in
   with either, so nobody is refused while the switch is under way.
3. ``testSecret``: a login with the pending password must succeed (``PING``).
4. ``finishSecret``: ``AWSCURRENT`` moves to the pending version, and only then the user keeps
   just the new password. A warm container still holding the old one is refused on its next
   new connection, reads the secret again (``engram.adapters.redis_client``) and logs in with
   the new one. Repeating the step (Secrets Manager retries a failed step) repeats the
   password set, so an old password never survives a finished rotation.

Each step is idempotent. ``CacheUserPasswords`` is the one call that differs between
ElastiCache (``ElastiCacheUserPasswords``: ``ModifyUser``, waiting for the user to be
``active`` before and after) and a self-hosted Redis (``RedisAclUserPasswords``:
``ACL SETUSER <user> resetpass >old >new`` on every node).
"""

from __future__ import annotations

import json
import logging
import time
from collections.abc import Callable, Sequence
from dataclasses import KW_ONLY, dataclass
from typing import Any, Protocol

_log = logging.getLogger("engram.adapters.cache_rotation")

STEPS = ("createSecret", "setSecret", "testSecret", "finishSecret")
PASSWORD_LENGTH = 40


class CacheUserPasswords(Protocol):
    """Sets the passwords (one or two) the cache accepts for the rotated user."""

    def set_passwords(self, username: str, passwords: Sequence[str]) -> None: ...


LoginCheck = Callable[[str, str], None]
"""Logs in with (username, password) and runs a command; raises when the login is refused."""


class RotationError(RuntimeError):
    """The rotation cannot go on (a version without the expected stage, a failed test)."""


class CacheSecretRotation:
    """The four rotation steps for one secret (``run(step, secret_id, token)``)."""

    def __init__(
        self, secrets: Any, users: CacheUserPasswords, *, login: LoginCheck | None = None
    ) -> None:
        self.secrets = secrets
        self.users = users
        self.login = login

    def run(self, step: str, secret_id: str, token: str) -> None:
        if step not in STEPS:
            raise RotationError(f"unknown rotation step {step!r}")
        stages = self.secrets.describe_secret(SecretId=secret_id)["VersionIdsToStages"]
        labels = stages.get(token)
        if labels is None and step != "createSecret":  # createSecret makes the version
            raise RotationError(f"version {token} of {secret_id} has no stage for rotation")
        if labels is not None and "AWSCURRENT" in labels and step != "finishSecret":
            _log.info("version %s of %s is already AWSCURRENT", token, secret_id)
            return
        if labels is not None and not {"AWSCURRENT", "AWSPENDING"} & set(labels):
            raise RotationError(f"version {token} of {secret_id} is not AWSPENDING")
        getattr(self, "_" + step.removesuffix("Secret"))(secret_id, token, stages)

    # --- the steps ------------------------------------------------------------------------
    def _create(self, secret_id: str, token: str, stages: dict[str, list[str]]) -> None:
        current = self._value(secret_id, stage="AWSCURRENT")
        if token in stages:
            try:
                self._value(secret_id, stage="AWSPENDING", version=token)
                return  # created by an earlier attempt of this step
            except self.secrets.exceptions.ResourceNotFoundException:
                pass  # the version Secrets Manager opened for the rotation, still empty
        password = self.secrets.get_random_password(
            PasswordLength=PASSWORD_LENGTH, ExcludePunctuation=True
        )["RandomPassword"]
        self.secrets.put_secret_value(
            SecretId=secret_id,
            ClientRequestToken=token,
            SecretString=json.dumps({**current, "password": password}),
            VersionStages=["AWSPENDING"],
        )

    def _set(self, secret_id: str, token: str, stages: dict[str, list[str]]) -> None:
        current = self._value(secret_id, stage="AWSCURRENT")
        pending = self._value(secret_id, stage="AWSPENDING", version=token)
        username = self._same_user(current, pending)
        self.users.set_passwords(username, [current["password"], pending["password"]])

    def _test(self, secret_id: str, token: str, stages: dict[str, list[str]]) -> None:
        pending = self._value(secret_id, stage="AWSPENDING", version=token)
        if self.login is None:
            return
        try:
            self.login(str(pending["username"]), str(pending["password"]))
        except Exception as exc:
            raise RotationError(f"the pending password of {secret_id} is refused") from exc

    def _finish(self, secret_id: str, token: str, stages: dict[str, list[str]]) -> None:
        current_version = next((v for v, s in stages.items() if "AWSCURRENT" in s), None)
        if current_version != token:
            self.secrets.update_secret_version_stage(
                SecretId=secret_id,
                VersionStage="AWSCURRENT",
                MoveToVersionId=token,
                RemoveFromVersionId=current_version,
            )
        new = self._value(secret_id, stage="AWSCURRENT")
        # the old password goes only now: until here every client could still read it
        self.users.set_passwords(str(new["username"]), [new["password"]])

    # --- helpers --------------------------------------------------------------------------
    def _value(self, secret_id: str, *, stage: str, version: str | None = None) -> dict[str, Any]:
        args: dict[str, str] = {"SecretId": secret_id, "VersionStage": stage}
        if version is not None:
            args["VersionId"] = version
        value = json.loads(self.secrets.get_secret_value(**args)["SecretString"])
        if not isinstance(value, dict) or not value.get("username") or not value.get("password"):
            raise RotationError(f"{secret_id} ({stage}): not a JSON username and password")
        return value

    @staticmethod
    def _same_user(current: dict[str, Any], pending: dict[str, Any]) -> str:
        if current["username"] != pending["username"]:
            raise RotationError("the pending version names another user than the current one")
        return str(current["username"])


@dataclass
class ElastiCacheUserPasswords:
    """``ModifyUser`` on the ElastiCache user ``user_id`` (the user must be ``active`` before
    it can be modified, and is ``modifying`` for a while after)."""

    client: Any
    user_id: str
    _: KW_ONLY
    wait_s: float = 600.0
    poll_s: float = 5.0
    sleep: Callable[[float], None] = time.sleep

    def set_passwords(self, username: str, passwords: Sequence[str]) -> None:
        user = self._wait_active()
        if user.get("UserName") != username:
            raise RotationError(f"ElastiCache user {self.user_id} is not {username!r}")
        self.client.modify_user(
            UserId=self.user_id,
            AuthenticationMode={"Type": "password", "Passwords": list(passwords)},
        )
        self._wait_active()

    def _wait_active(self) -> dict[str, Any]:
        waited = 0.0
        while True:
            users = self.client.describe_users(UserId=self.user_id)["Users"]
            if not users:
                raise RotationError(f"no ElastiCache user {self.user_id}")
            if users[0].get("Status") == "active":
                return dict(users[0])
            if waited >= self.wait_s:
                raise RotationError(f"ElastiCache user {self.user_id} stays {users[0]['Status']}")
            self.sleep(self.poll_s)
            waited += self.poll_s


def redis_login_check(settings: Any) -> LoginCheck:
    """A ``LoginCheck`` against the cache of ``settings`` (its URL, TLS and cluster mode)."""

    def check(username: str, password: str) -> None:
        from pydantic import SecretStr

        from engram.adapters.redis_client import make_redis

        login = settings.model_copy(
            update={
                "redis_username": username,
                "redis_password": SecretStr(password),
                "redis_secret_arn": None,
            }
        )
        client = make_redis(login)
        try:
            client.ping()
        finally:
            client.close()

    return check


class RedisAclUserPasswords:
    """``ACL SETUSER <user> resetpass >p1 [>p2]`` through an administrator's client, on every
    node of a cluster (each node keeps its own ACL)."""

    def __init__(self, admin: Any) -> None:
        self.admin = admin

    def set_passwords(self, username: str, passwords: Sequence[str]) -> None:
        from engram.adapters.redis_client import is_cluster

        rules = ["resetpass", *(">" + p for p in passwords)]
        options: dict[str, Any] = {}
        if is_cluster(self.admin):
            from redis.cluster import RedisCluster

            options["target_nodes"] = RedisCluster.ALL_NODES
        self.admin.execute_command("ACL", "SETUSER", username, *rules, **options)


def rotation_from_settings(
    settings: Any, *, secrets: Any = None, elasticache: Any = None
) -> CacheSecretRotation:
    """The rotation of the cache function: ``ModifyUser`` on ``Settings.redis_user_id``, the
    pending password tested against ``Settings.redis_url``."""
    import boto3

    from engram.adapters.secrets import secrets_client

    if not settings.redis_user_id:
        raise ValueError("ENGRAM_REDIS_USER_ID: the cache user to rotate is not set")
    client = elasticache or boto3.client("elasticache", region_name=settings.aws_region)
    return CacheSecretRotation(
        secrets or secrets_client(settings.aws_region),
        ElastiCacheUserPasswords(client, settings.redis_user_id),
        login=redis_login_check(settings) if settings.redis_url else None,
    )
