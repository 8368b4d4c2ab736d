"""Credentials in the synthesised templates of every stage: no Lambda environment holds a secret
value (resolved at deploy time or plain), only the ARNs of the secrets the function may read;
the cache user's ACL is Engram's (``engram.adapters.redis_acl``)."""

from __future__ import annotations

import json
from typing import Any

import pytest
from infra.config import LAMBDA_FUNCTIONS, STAGES
from infra.constructs.database import DATABASE_APP_USER
from infra.constructs.functions import DATABASE_USERS, REDIS_USERS
from tests.infrastructure.synth import Synthesized
from tests.infrastructure.synth import ref as _ref

from engram.adapters.redis_acl import access_string
from engram.settings import Settings

pytestmark = pytest.mark.infrastructure

SECRET_TYPE = "AWS::SecretsManager::Secret"
SECRET_REFS = (SECRET_TYPE, "AWS::SecretsManager::SecretTargetAttachment")
"""What a Ref to a secret's ARN points at (a secret attached to its database is Ref'd through
the attachment, whose Ref is the secret's ARN)."""


def _lambdas(synth: Synthesized) -> dict[str, dict[str, Any]]:
    """Every Lambda function of every stack (CDK's providers included), by stack/logical id."""
    return {
        f"{stack}/{logical_id}": resource
        for stack, template in synth.templates.items()
        for logical_id, resource in template["Resources"].items()
        if resource["Type"] == "AWS::Lambda::Function"
    }


def _variables(fn: dict[str, Any]) -> dict[str, Any]:
    variables: dict[str, Any] = fn["Properties"].get("Environment", {}).get("Variables", {})
    return variables


def _target(synth: Synthesized, value: Any) -> tuple[str, dict[str, Any]]:
    """(logical id, resource) a Ref/GetAtt points at, following Fn::ImportValue to its export."""
    if isinstance(value, dict) and "Fn::ImportValue" in value:
        name = value["Fn::ImportValue"]
        for template in synth.templates.values():
            for output in template.get("Outputs", {}).values():
                if output.get("Export", {}).get("Name") == name:
                    logical_id = _ref(output["Value"])
                    return logical_id, template["Resources"][logical_id]
        raise AssertionError(f"no export named {name}")
    logical_id = _ref(value)
    for template in synth.templates.values():
        if logical_id in template["Resources"]:
            return logical_id, template["Resources"][logical_id]
    raise AssertionError(f"unresolvable {value!r}")


def _cache_secret(synth: Synthesized) -> str:
    """The logical id of the one secret of the cache's credentials."""
    (cache_secret,) = [k for k in synth.resources(SECRET_TYPE, "Data") if k.startswith("Cache")]
    return cache_secret


def _handler_name(fn: dict[str, Any]) -> str | None:
    handler = str(fn["Properties"].get("Handler", ""))
    parts = handler.split(".")
    return parts[1] if handler.startswith("functions.") and len(parts) > 1 else None


@pytest.mark.parametrize("stage", sorted(STAGES))
def test_no_lambda_environment_holds_a_secret_value(stage: str, synth_cache: Any) -> None:
    synth: Synthesized = synth_cache(stage)
    lambdas = _lambdas(synth)
    assert len(lambdas) > len(LAMBDA_FUNCTIONS)
    secret_arns = 0
    for path, fn in lambdas.items():
        for name, value in _variables(fn).items():
            text = json.dumps(value)
            # a dynamic reference would put the value into the function's configuration
            assert "{{resolve:" not in text, (path, name)
            assert "PASSWORD" not in name.upper(), (path, name)
            if name.endswith("_SECRET_ARN"):
                secret_arns += 1
                _, resource = _target(synth, value)
                assert resource["Type"] in SECRET_REFS, (path, name)
            else:
                assert "SECRET" not in name.upper(), (path, name)
                # nothing else points at a secret (its Ref is an ARN, but under another name)
                if isinstance(value, dict) and ("Ref" in value or "Fn::ImportValue" in value):
                    assert _target(synth, value)[1]["Type"] not in SECRET_REFS, (path, name)
    assert secret_arns >= len(LAMBDA_FUNCTIONS)


@pytest.mark.parametrize("stage", sorted(STAGES))
def test_functions_read_the_cache_secret_at_run_time_as_a_cluster(
    stage: str, synth_cache: Any
) -> None:
    synth: Synthesized = synth_cache(stage)
    cache_secret = _cache_secret(synth)
    readers = _secret_readers(synth, cache_secret)
    seen = set()
    for fn in _lambdas(synth).values():
        name = _handler_name(fn)
        if name not in LAMBDA_FUNCTIONS:
            continue
        seen.add(name)
        variables = _variables(fn)
        role = _ref(fn["Properties"]["Role"])
        if name in REDIS_USERS:
            assert _target(synth, variables["ENGRAM_REDIS_SECRET_ARN"])[0] == cache_secret
            assert variables["ENGRAM_REDIS_CLUSTER"] == "true"
            assert variables["ENGRAM_REDIS_TLS"] == "true"
            assert "ENGRAM_REDIS_USERNAME" not in variables  # the secret names the user
            assert role in readers, name
        else:
            assert "ENGRAM_REDIS_SECRET_ARN" not in variables
            assert role not in readers, name
    assert seen == set(LAMBDA_FUNCTIONS)


def _secret_readers(synth: Synthesized, secret: str) -> set[str]:
    """Logical ids of the roles allowed secretsmanager:GetSecretValue on ``secret``."""
    roles: set[str] = set()
    for policy in synth.resources("AWS::IAM::Policy").values():
        for statement in policy["Properties"]["PolicyDocument"]["Statement"]:
            actions = statement["Action"]
            actions = actions if isinstance(actions, list) else [actions]
            resources = statement["Resource"]
            resources = resources if isinstance(resources, list) else [resources]
            if "secretsmanager:GetSecretValue" in actions and secret in {
                _secret_id(synth, r) for r in resources if _points_at_a_secret(synth, r)
            }:
                roles |= {_ref(r) for r in policy["Properties"]["Roles"] if isinstance(r, dict)}
    return roles


def _points_at_a_secret(synth: Synthesized, value: Any) -> bool:
    if not isinstance(value, dict) or not {"Ref", "Fn::GetAtt", "Fn::ImportValue"} & set(value):
        return False
    return _target(synth, value)[1]["Type"] in SECRET_REFS


@pytest.mark.parametrize("stage", sorted(STAGES))
def test_the_cache_user_has_engrams_acl_on_its_prefix(stage: str, synth_cache: Any) -> None:
    synth: Synthesized = synth_cache(stage)
    users = {
        u["Properties"]["UserName"]: u["Properties"]
        for u in synth.resources("AWS::ElastiCache::User", "Data").values()
    }
    prefix = Settings.model_fields["redis_key_prefix"].default
    engram = users["engram"]
    assert engram["AccessString"] == access_string(prefix)
    assert "+@all" not in engram["AccessString"]
    assert "~*" not in engram["AccessString"].split()
    assert users["default"]["AccessString"] == "off -@all"
    # every function speaking to the cache uses the prefix the ACL grants
    for fn in _lambdas(synth).values():
        variables = _variables(fn)
        if "ENGRAM_REDIS_URL" in variables:
            assert variables["ENGRAM_REDIS_KEY_PREFIX"] == prefix


# --- the database: the app role's secret for the functions, the master for the migration ----


def _secret_id(synth: Synthesized, value: Any) -> str:
    """The logical id of the secret a Ref points at (through its attachment, if attached)."""
    logical_id, resource = _target(synth, value)
    if resource["Type"] == "AWS::SecretsManager::SecretTargetAttachment":
        return _ref(resource["Properties"]["SecretId"])
    assert resource["Type"] == SECRET_TYPE, logical_id
    return logical_id


def _generated_username(synth: Synthesized, secret: str) -> str:
    resource = synth.resources(SECRET_TYPE, "Data")[secret]
    template = resource["Properties"]["GenerateSecretString"]["SecretStringTemplate"]
    return str(json.loads(template)["username"])


@pytest.mark.parametrize("stage", sorted(STAGES))
def test_functions_log_in_as_the_app_role_and_only_the_migration_as_the_master(
    stage: str, synth_cache: Any
) -> None:
    synth: Synthesized = synth_cache(stage)
    (cluster,) = synth.resources("AWS::RDS::DBCluster", "Data").values()
    master = _secret_id(synth, {"Ref": _master_secret_ref(cluster)})
    (proxy,) = synth.resources("AWS::RDS::DBProxy", "Data").values()
    registered = {_secret_id(synth, auth["SecretArn"]) for auth in proxy["Properties"]["Auth"]}
    assert master in registered  # the migration logs in through the proxy too
    (app,) = registered - {master}
    assert _generated_username(synth, app) == DATABASE_APP_USER
    assert _generated_username(synth, master) != DATABASE_APP_USER

    migrations = 0
    for fn in _lambdas(synth).values():
        variables = _variables(fn)
        if "ENGRAM_DATABASE_SECRET_ARN" not in variables:
            continue
        role = _ref(fn["Properties"]["Role"])
        logs_in_as = _secret_id(synth, variables["ENGRAM_DATABASE_SECRET_ARN"])
        if fn["Properties"]["Handler"] == "engram_migrate.handler.handler":
            migrations += 1
            assert logs_in_as == master
            assert _secret_id(synth, variables["ENGRAM_DATABASE_APP_SECRET_ARN"]) == app
            assert role in _secret_readers(synth, app)
        else:
            assert _handler_name(fn) in DATABASE_USERS
            assert logs_in_as == app
            assert "ENGRAM_DATABASE_APP_SECRET_ARN" not in variables
            assert role not in _secret_readers(synth, master)
            assert role in _secret_readers(synth, app)
    assert migrations == 1

    # the app role's password rotates as the master's does, every 30 days
    schedules = {
        _secret_id(synth, s["Properties"]["SecretId"]): s["Properties"]
        for s in synth.resources("AWS::SecretsManager::RotationSchedule", "Data").values()
    }
    assert schedules[app]["RotationRules"]["ScheduleExpression"] == "rate(30 days)"
    assert schedules[master]["RotationRules"]["ScheduleExpression"] == "rate(30 days)"
    # the role exists once the migration ran (Service stack): its first rotation is scheduled
    assert schedules[app]["RotateImmediatelyOnUpdate"] is False


def _master_secret_ref(cluster: dict[str, Any]) -> str:
    """The secret of the cluster's master password (a dynamic reference in the cluster)."""
    _, parts = cluster["Properties"]["MasterUserPassword"]["Fn::Join"]
    (secret,) = [_ref(part) for part in parts if isinstance(part, dict)]
    return secret


# --- the cache password rotates on a schedule, by Engram's rotation function ----------------


def _actions_on(synth: Synthesized, role: str, predicate: Any) -> set[str]:
    found: set[str] = set()
    for policy in synth.resources("AWS::IAM::Policy").values():
        if role not in {_ref(r) for r in policy["Properties"]["Roles"] if isinstance(r, dict)}:
            continue
        for statement in policy["Properties"]["PolicyDocument"]["Statement"]:
            resources = statement["Resource"]
            resources = resources if isinstance(resources, list) else [resources]
            if any(predicate(r) for r in resources):
                actions = statement["Action"]
                found |= set(actions if isinstance(actions, list) else [actions])
    return found


@pytest.mark.parametrize("stage", sorted(STAGES))
def test_the_cache_secret_rotates_on_a_schedule_by_the_rotation_function(
    stage: str, synth_cache: Any
) -> None:
    synth: Synthesized = synth_cache(stage)
    cache_secret = _cache_secret(synth)
    (app_user,) = [
        k
        for k, u in synth.resources("AWS::ElastiCache::User", "Data").items()
        if u["Properties"]["UserName"] == "engram"
    ]
    schedules = [
        s["Properties"]
        for s in synth.resources("AWS::SecretsManager::RotationSchedule").values()
        if _secret_id(synth, s["Properties"]["SecretId"]) == cache_secret
    ]
    (schedule,) = schedules
    days = STAGES[stage].cache_rotation_days
    assert schedule["RotationRules"]["ScheduleExpression"] == f"rate({days} days)"
    function_id, fn = _target(synth, schedule["RotationLambdaARN"])
    assert fn["Properties"]["Handler"] == "functions.rotate_cache.handler.handler"

    # Secrets Manager may invoke it
    permissions = [
        p["Properties"]
        for p in synth.resources("AWS::Lambda::Permission").values()
        if p["Properties"]["Principal"] == "secretsmanager.amazonaws.com"
    ]
    mine = [p for p in permissions if _ref(p["FunctionName"]) == function_id]
    assert mine
    assert all(p["SourceAccount"] == {"Ref": "AWS::AccountId"} for p in mine)  # no deputy

    # it knows the user and the cache, but holds no password
    variables = _variables(fn)
    assert _target(synth, variables["ENGRAM_REDIS_USER_ID"])[0] == app_user
    assert variables["ENGRAM_REDIS_CLUSTER"] == "true"
    assert "ENGRAM_REDIS_URL" in variables
    assert not [name for name in variables if "PASSWORD" in name or "SECRET" in name]
    assert "VpcConfig" in fn["Properties"]  # it tests the pending password against the cache

    role = _ref(fn["Properties"]["Role"])

    def on_secret(resource: Any) -> bool:
        return _points_at_a_secret(synth, resource) and _secret_id(synth, resource) == (
            cache_secret
        )

    def on_user(resource: Any) -> bool:
        text = json.dumps(resource)
        return ":user:" in text and app_user in text

    assert {
        "secretsmanager:DescribeSecret",
        "secretsmanager:GetSecretValue",
        "secretsmanager:PutSecretValue",
        "secretsmanager:UpdateSecretVersionStage",
    } <= _actions_on(synth, role, on_secret)
    assert _actions_on(synth, role, on_user) == {
        "elasticache:DescribeUsers",
        "elasticache:ModifyUser",
    }
    # nothing else may change the secret or the user
    for other in _lambdas(synth).values():
        other_role = _ref(other["Properties"]["Role"])
        if other_role == role:
            continue
        assert not _actions_on(synth, other_role, on_user)
        assert "secretsmanager:PutSecretValue" not in _actions_on(synth, other_role, on_secret)

    # a failed step is alarmed
    alarms = [
        a["Properties"]
        for a in synth.resources("AWS::CloudWatch::Alarm", "Monitoring").values()
        if a["Properties"].get("MetricName") == "Errors"
        and function_id in json.dumps(a["Properties"].get("Dimensions", []))
    ]
    assert [a for a in alarms if a["Threshold"] == 1 and a["AlarmActions"]]

    # the ElastiCache API is reachable from the isolated subnets
    services = [
        json.dumps(e["Properties"]["ServiceName"])
        for e in synth.resources("AWS::EC2::VPCEndpoint", "Network").values()
    ]
    assert [s for s in services if s.endswith('.elasticache"]]}')]
