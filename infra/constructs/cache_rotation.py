"""Rotation of the cache password.

Secrets Manager invokes this function for each step of a rotation of the cache secret
(``engram.adapters.cache_rotation``): the ElastiCache user holds the current and the pending
password while the secret switches, then only the new one; the functions read the secret again
when refused. No deploy is part of a rotation."""

from __future__ import annotations

from aws_cdk import Aws, Duration
from aws_cdk import aws_iam as iam
from aws_cdk import aws_lambda as lambda_
from aws_cdk import aws_secretsmanager as secretsmanager

from constructs import Construct
from infra.bundling import app_function
from infra.config import CACHE_ROTATION_FUNCTION, FunctionConfig
from infra.constructs.functions import Functions

CACHE_ROTATION_TIMEOUT_S = 900
"""One rotation step may wait for the ElastiCache user to be active before and after
ModifyUser (minutes at most); a step that times out is retried by Secrets Manager."""


class CacheRotation:
    """The rotation function and the cache secret's rotation schedule, built directly in
    ``scope`` (the stack)."""

    def __init__(self, scope: Construct, *, functions: Functions) -> None:
        config, data = functions.config, functions.data
        redis_env = functions.redis_env
        rotation = functions.factory.make(
            app_function(CACHE_ROTATION_FUNCTION, functions.repo_root),
            FunctionConfig(memory_mb=256, timeout_s=CACHE_ROTATION_TIMEOUT_S),
            {
                **functions.base_env,
                **{k: v for k, v in redis_env.items() if k != "ENGRAM_REDIS_SECRET_ARN"},
                "ENGRAM_REDIS_USER_ID": data.cache_user_id,
            },
            wildcard_reason="X-Ray tracing and secretsmanager:GetRandomPassword (the rotation's "
            "new password) use Resource '*': neither has resource-level permissions. The "
            "secret and the ElastiCache user are granted by ARN.",
        ).function
        rotation.add_to_role_policy(
            iam.PolicyStatement(
                actions=["elasticache:DescribeUsers", "elasticache:ModifyUser"],
                resources=[
                    f"arn:{Aws.PARTITION}:elasticache:{Aws.REGION}:{Aws.ACCOUNT_ID}"
                    f":user:{data.cache_user_id}"
                ],
            )
        )
        # The schedule grants the function the secret's rotation actions and lets Secrets
        # Manager invoke it; the first rotation runs when the schedule is created.
        secretsmanager.RotationSchedule(
            scope,
            "CacheSecretRotation",
            secret=data.cache_secret,
            rotation_lambda=rotation,
            automatically_after=Duration.days(config.cache_rotation_days),
        )
        # Only Secrets Manager acting for this account may invoke it (no confused deputy).
        for child in rotation.node.find_all():
            if isinstance(child, lambda_.CfnPermission) and child.principal == (
                "secretsmanager.amazonaws.com"
            ):
                child.source_account = Aws.ACCOUNT_ID
        self.function = rotation
