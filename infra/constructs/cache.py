"""Cache: ElastiCache Serverless (Valkey), TLS always on, RBAC password auth: a disabled default
user and Engram's user, allowed the commands Engram uses on its key prefix only, whose password
is in a Secrets Manager secret (rotated by the service's rotation function)."""

from __future__ import annotations

import json

from aws_cdk import aws_ec2 as ec2
from aws_cdk import aws_elasticache as elasticache
from aws_cdk import aws_secretsmanager as secretsmanager

from constructs import Construct
from engram.adapters.redis_acl import access_string
from engram.settings import Settings
from infra.config import StageConfig
from infra.constructs.common import allow_tcp, removal_policy, stack_unique
from infra.constructs.nag import acknowledge

CACHE_PORTS = (6379, 6380)  # serverless: primary and reader endpoints
CACHE_USER = "engram"
CACHE_KEY_PREFIX: str = Settings.model_fields["redis_key_prefix"].default
"""The prefix of every key Engram writes: its cache user may touch keys under it only."""


class Cache:
    """The serverless cache, its users and user group and the cache secret, built directly in
    ``scope`` (the stack). Only ``functions_sg`` reaches it."""

    def __init__(
        self,
        scope: Construct,
        *,
        config: StageConfig,
        vpc: ec2.IVpc,
        subnet_ids: list[str],
        functions_sg: ec2.ISecurityGroup,
    ) -> None:
        removal = removal_policy(config.retain_data)
        cache_sg = ec2.SecurityGroup(
            scope, "CacheSg", vpc=vpc, description="ElastiCache", allow_all_outbound=False
        )
        allow_tcp(
            scope, "FunctionsToCache", source=functions_sg, target=cache_sg, ports=CACHE_PORTS
        )
        self.secret = secretsmanager.Secret(
            scope,
            "CacheSecret",
            description="ElastiCache user for Engram (username + password)",
            generate_secret_string=secretsmanager.SecretStringGenerator(
                secret_string_template=json.dumps({"username": CACHE_USER}),
                generate_string_key="password",
                exclude_punctuation=True,
                password_length=40,
            ),
            removal_policy=removal,
        )
        # ElastiCache needs explicit ids for the cache, its users and its user group: they are
        # unique to this instance of the stack.
        cache_name = stack_unique(f"engram-{config.name}")
        default_user = elasticache.CfnUser(
            scope,
            "CacheDefaultUser",
            engine="valkey",
            user_id=f"{cache_name}-default",
            user_name="default",
            access_string="off -@all",
            no_password_required=True,
        )
        app_user = elasticache.CfnUser(
            scope,
            "CacheAppUser",
            engine="valkey",
            user_id=f"{cache_name}-app",
            user_name=CACHE_USER,
            # The commands Engram uses, on its key prefix only (the test servers use the same).
            access_string=access_string(CACHE_KEY_PREFIX),
            authentication_mode={
                "Type": "password",
                "Passwords": [self.secret.secret_value_from_json("password").unsafe_unwrap()],
            },
        )
        user_group = elasticache.CfnUserGroup(
            scope,
            "CacheUsers",
            engine="valkey",
            user_group_id=cache_name,
            user_ids=[default_user.user_id, app_user.user_id],
        )
        user_group.add_resource_dependency(default_user)
        user_group.add_resource_dependency(app_user)
        self.cache = elasticache.CfnServerlessCache(
            scope,
            "Cache",
            engine="valkey",
            major_engine_version="8",
            serverless_cache_name=cache_name,
            description=f"Engram behavioural memory ({config.name})",
            security_group_ids=[cache_sg.security_group_id],
            subnet_ids=subnet_ids,
            user_group_id=user_group.user_group_id,
            cache_usage_limits=elasticache.CfnServerlessCache.CacheUsageLimitsProperty(
                data_storage=elasticache.CfnServerlessCache.DataStorageProperty(
                    maximum=config.cache_max_data_gb, unit="GB"
                ),
                ecpu_per_second=elasticache.CfnServerlessCache.ECPUPerSecondProperty(
                    maximum=config.cache_max_ecpu_per_second
                ),
            ),
            snapshot_retention_limit=config.cache_snapshot_retention_days,
            daily_snapshot_time="04:00",
        )
        self.cache.add_resource_dependency(user_group)
        for resource in (self.cache, user_group, app_user, default_user):
            resource.apply_removal_policy(removal)
        self.key_prefix = CACHE_KEY_PREFIX
        self.user_id = app_user.ref  # the id ModifyUser takes (Ref of a user: its id)
        self.redis_url = (
            f"rediss://{self.cache.attr_endpoint_address}:{self.cache.attr_endpoint_port}"
        )
        acknowledge(
            self.secret,
            "AwsSolutions-SMG4",
            "The cache secret is rotated by Engram's own rotation function, whose rotation "
            "schedule lives in the Service stack beside the function (here it would make a "
            "cycle between the stacks); cdk-nag looks for a schedule in this stack only.",
        )
