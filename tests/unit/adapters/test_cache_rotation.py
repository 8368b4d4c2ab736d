"""The ElastiCache side of the cache rotation, on botocore's Stubber: ``ModifyUser`` with the
passwords the step names, only once the user is ``active``, and waiting for it again after."""

from __future__ import annotations

from typing import Any

import boto3
import pytest
from botocore.stub import Stubber

from engram.adapters.cache_rotation import (
    CacheSecretRotation,
    ElastiCacheUserPasswords,
    RotationError,
    rotation_from_settings,
)
from engram.settings import Settings

USER_ID = "engram-dev-app"


def user(status: str, name: str = "engram") -> dict[str, Any]:
    return {"Users": [{"UserId": USER_ID, "UserName": name, "Status": status}]}


@pytest.fixture
def elasticache() -> Any:
    return boto3.client(
        "elasticache",
        region_name="us-east-1",
        aws_access_key_id="testing",
        aws_secret_access_key="testing",
    )


def test_modify_user_sets_both_passwords_once_the_user_is_active(elasticache: Any) -> None:
    waits: list[float] = []
    users = ElastiCacheUserPasswords(elasticache, USER_ID, poll_s=5, sleep=waits.append)
    with Stubber(elasticache) as stub:
        stub.add_response("describe_users", user("modifying"), {"UserId": USER_ID})
        stub.add_response("describe_users", user("active"), {"UserId": USER_ID})
        stub.add_response(
            "modify_user",
            {"UserId": USER_ID},
            {
                "UserId": USER_ID,
                "AuthenticationMode": {"Type": "password", "Passwords": ["old", "new"]},
            },
        )
        stub.add_response("describe_users", user("modifying"), {"UserId": USER_ID})
        stub.add_response("describe_users", user("active"), {"UserId": USER_ID})
        users.set_passwords("engram", ["old", "new"])
        stub.assert_no_pending_responses()
    assert waits == [5, 5]


def test_another_user_name_or_a_user_that_stays_busy_stops_the_rotation(elasticache: Any) -> None:
    users = ElastiCacheUserPasswords(
        elasticache, USER_ID, wait_s=10, poll_s=5, sleep=lambda s: None
    )
    with Stubber(elasticache) as stub:
        stub.add_response("describe_users", user("active", name="someone"), {"UserId": USER_ID})
        with pytest.raises(RotationError, match="is not 'engram'"):
            users.set_passwords("engram", ["new"])
        for _ in range(3):
            stub.add_response("describe_users", user("modifying"), {"UserId": USER_ID})
        with pytest.raises(RotationError, match="stays modifying"):
            users.set_passwords("engram", ["new"])
        stub.assert_no_pending_responses()


def test_the_rotation_needs_the_user_id_and_refuses_unknown_steps(elasticache: Any) -> None:
    with pytest.raises(ValueError, match="ENGRAM_REDIS_USER_ID"):
        rotation_from_settings(Settings(), secrets=object(), elasticache=elasticache)
    rotation = rotation_from_settings(
        Settings(redis_user_id=USER_ID), secrets=object(), elasticache=elasticache
    )
    assert isinstance(rotation, CacheSecretRotation)
    assert rotation.login is None  # no cache URL: the test step only checks the version
    with pytest.raises(RotationError, match="unknown rotation step"):
        rotation.run("dropSecret", "arn", "token")
