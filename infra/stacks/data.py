"""Data: Aurora Serverless v2 PostgreSQL 16 (pgvector) behind an RDS Proxy, and ElastiCache
Serverless Valkey with TLS and password auth. Retained and deletion-protected when the stage
config says so; whatever may be retained has a generated name, so a deploy after a failed one
or after a teardown never meets a leftover of the same name."""

from __future__ import annotations

import json
from typing import Any

from aws_cdk import Duration, Fn, RemovalPolicies, Stack
from aws_cdk import aws_ec2 as ec2
from aws_cdk import aws_elasticache as elasticache
from aws_cdk import aws_logs as logs
from aws_cdk import aws_rds as rds
from aws_cdk import aws_secretsmanager as secretsmanager

from constructs import Construct
from engram.adapters.redis_acl import access_string
from engram.settings import Settings
from infra.config import StageConfig
from infra.constructs.common import log_retention, removal_policy, stack_unique
from infra.constructs.nag import acknowledge
from infra.stacks.network import APP_SUBNETS

POSTGRES_PORT = 5432
CACHE_PORTS = (6379, 6380)  # serverless: primary and reader endpoints
DATABASE_NAME = "engram"
DATABASE_APP_USER = "engram_service"
"""The functions' login role (``engram.adapters.postgres.login_role``; never the master)."""
CACHE_USER = "engram"
CACHE_KEY_PREFIX: str = Settings.model_fields["redis_key_prefix"].default
"""The prefix of every key Engram writes: its cache user may touch keys under it only."""
# A current Aurora PostgreSQL 16 minor: new clusters cannot be created on deprecated minors
# (cfn-lint W3690 knows which), and the migrations are tested on PostgreSQL 16.
POSTGRES_VERSION = rds.AuroraPostgresEngineVersion.VER_16_13


class DataStack(Stack):
    """Aurora + RDS Proxy + Secrets Manager, and the serverless cache."""

    def __init__(
        self,
        scope: Construct,
        id: str,
        *,
        config: StageConfig,
        vpc: ec2.IVpc,
        functions_sg: ec2.ISecurityGroup,
        endpoints_sg: ec2.ISecurityGroup,
        **kwargs: Any,
    ) -> None:
        super().__init__(scope, id, **kwargs)
        removal = removal_policy(config.retain_data)
        subnets = ec2.SubnetSelection(subnet_type=APP_SUBNETS)

        # --- security groups: the functions reach the proxy and the cache, nothing else ------
        db_sg = ec2.SecurityGroup(
            self, "DatabaseSg", vpc=vpc, description="Aurora cluster", allow_all_outbound=False
        )
        proxy_sg = ec2.SecurityGroup(
            self, "ProxySg", vpc=vpc, description="RDS Proxy", allow_all_outbound=False
        )
        cache_sg = ec2.SecurityGroup(
            self, "CacheSg", vpc=vpc, description="ElastiCache", allow_all_outbound=False
        )
        rotation_sg = ec2.SecurityGroup(
            self,
            "RotationSg",
            vpc=vpc,
            description="Database secret rotation function",
            allow_all_outbound=False,
        )
        postgres = (POSTGRES_PORT, POSTGRES_PORT)
        _allow(self, "FunctionsToProxy", source=functions_sg, target=proxy_sg, ports=postgres)
        _allow(self, "FunctionsToCache", source=functions_sg, target=cache_sg, ports=CACHE_PORTS)
        _allow(
            self, "RotationToEndpoints", source=rotation_sg, target=endpoints_sg, ports=(443, 443)
        )

        # --- Aurora Serverless v2 -----------------------------------------------------------
        # No cluster identifier and no secret name: CloudFormation generates both.
        self.cluster = rds.DatabaseCluster(
            self,
            "Aurora",
            engine=rds.DatabaseClusterEngine.aurora_postgres(version=POSTGRES_VERSION),
            credentials=rds.Credentials.from_generated_secret("engram_admin"),
            default_database_name=DATABASE_NAME,
            writer=rds.ClusterInstance.serverless_v2("Writer"),
            readers=[
                rds.ClusterInstance.serverless_v2(f"Reader{i + 1}", scale_with_writer=True)
                for i in range(config.aurora_readers)
            ],
            serverless_v2_min_capacity=config.aurora_min_acu,
            serverless_v2_max_capacity=config.aurora_max_acu,
            vpc=vpc,
            vpc_subnets=subnets,
            security_groups=[db_sg],
            storage_encrypted=True,
            iam_authentication=True,
            deletion_protection=config.deletion_protection,
            removal_policy=removal,
            backup=rds.BackupProps(retention=Duration.days(config.backup_retention_days)),
            cloudwatch_logs_exports=["postgresql"],
        )
        # The log group RDS exports to, created here (not with cloudwatch_logs_retention) so no
        # log-retention custom resource with broad IAM permissions is needed. Its name follows
        # the generated cluster identifier; the instances (the only writers of PostgreSQL logs)
        # wait for it, so RDS never creates it first.
        postgres_logs = logs.LogGroup(
            self,
            "PostgresLogs",
            log_group_name=Fn.join(
                "", ["/aws/rds/cluster/", self.cluster.cluster_identifier, "/postgresql"]
            ),
            retention=log_retention(config.log_retention_days),
            removal_policy=removal_policy(config.retain_logs),
        )
        for instance in self.cluster.node.children:
            if isinstance(instance.node.default_child, rds.CfnDBInstance):
                instance.node.add_dependency(postgres_logs)
        assert self.cluster.secret is not None  # from_generated_secret always makes one
        self.database_secret = self.cluster.secret
        self.cluster.add_rotation_single_user(
            automatically_after=Duration.days(30),
            security_group=rotation_sg,
            vpc_subnets=subnets,
        )

        # The service's own login role (created by the migration from this secret; no
        # superuser, no BYPASSRLS, member of engram_app): the functions log in as it through
        # the proxy, and only the migration uses the master secret. It rotates like the
        # master, every 30 days, by the single-user function (the role sets its own password).
        self.database_app_secret = rds.DatabaseSecret(
            self,
            "DatabaseAppSecret",
            username=DATABASE_APP_USER,
            dbname=DATABASE_NAME,
        ).attach(self.cluster)
        secretsmanager.SecretRotation(
            self,
            "DatabaseAppRotation",
            application=secretsmanager.SecretRotationApplication.POSTGRES_ROTATION_SINGLE_USER,
            secret=self.database_app_secret,
            target=self.cluster,
            vpc=vpc,
            vpc_subnets=subnets,
            security_group=rotation_sg,
            automatically_after=Duration.days(30),
            # the role exists once the migration (Service stack) ran: no rotation at creation
            rotate_immediately_on_update=False,
        )

        self.proxy = self.cluster.add_proxy(
            "Proxy",
            secrets=[self.database_secret, self.database_app_secret],
            vpc=vpc,
            vpc_subnets=subnets,
            security_groups=[proxy_sg],
            require_tls=True,
            db_proxy_name=f"engram-{config.name}",
        )
        self.database_url = (
            f"postgresql://{self.proxy.endpoint}:{POSTGRES_PORT}/{DATABASE_NAME}?sslmode=require"
        )

        # --- ElastiCache Serverless (Valkey), TLS always on, RBAC password auth --------------
        self.cache_secret = secretsmanager.Secret(
            self,
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
            self,
            "CacheDefaultUser",
            engine="valkey",
            user_id=f"{cache_name}-default",
            user_name="default",
            access_string="off -@all",
            no_password_required=True,
        )
        app_user = elasticache.CfnUser(
            self,
            "CacheAppUser",
            engine="valkey",
            user_id=f"{cache_name}-app",
            user_name=CACHE_USER,
            # The commands Engram uses, on its key prefix only (the test servers use the same).
            access_string=access_string(CACHE_KEY_PREFIX),
            authentication_mode={
                "Type": "password",
                "Passwords": [self.cache_secret.secret_value_from_json("password").unsafe_unwrap()],
            },
        )
        user_group = elasticache.CfnUserGroup(
            self,
            "CacheUsers",
            engine="valkey",
            user_group_id=cache_name,
            user_ids=[default_user.user_id, app_user.user_id],
        )
        user_group.add_resource_dependency(default_user)
        user_group.add_resource_dependency(app_user)
        self.cache = elasticache.CfnServerlessCache(
            self,
            "Cache",
            engine="valkey",
            major_engine_version="8",
            serverless_cache_name=cache_name,
            description=f"Engram behavioural memory ({config.name})",
            security_group_ids=[cache_sg.security_group_id],
            subnet_ids=vpc.select_subnets(subnet_type=APP_SUBNETS).subnet_ids,
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
        self.cache_key_prefix = CACHE_KEY_PREFIX
        self.cache_user_id = app_user.ref  # the id ModifyUser takes (Ref of a user: its id)
        self.redis_url = (
            f"rediss://{self.cache.attr_endpoint_address}:{self.cache.attr_endpoint_port}"
        )

        # Everything holding data or credentials follows the stage's retention value, including
        # the secret the cluster generates for itself and the subnet group a kept cluster is in.
        RemovalPolicies.of(self).apply(
            removal,
            apply_to_resource_types=[
                "AWS::RDS::DBCluster",
                "AWS::RDS::DBInstance",
                "AWS::RDS::DBSubnetGroup",
                "AWS::SecretsManager::Secret",
                "AWS::ElastiCache::ServerlessCache",
                "AWS::ElastiCache::UserGroup",
                "AWS::ElastiCache::User",
            ],
        )

        # --- acknowledged cdk-nag findings ----------------------------------------------------
        acknowledge(
            self.cluster,
            "AwsSolutions-RDS11",
            "The cluster sits in isolated subnets and only the proxy security group may reach it; "
            "moving PostgreSQL off 5432 would add no protection and break standard tooling.",
        )
        acknowledge(
            self.cache_secret,
            "AwsSolutions-SMG4",
            "The cache secret is rotated by Engram's own rotation function, whose rotation "
            "schedule lives in the Service stack beside the function (here it would make a "
            "cycle between the stacks); cdk-nag looks for a schedule in this stack only.",
        )
        # Stage values, not stage names, decide whether these two findings exist at all.
        if not config.deletion_protection:
            acknowledge(
                self.cluster,
                "AwsSolutions-RDS10",
                "This stage's config disables deletion protection so that a disposable "
                "development stage can be torn down; prod enables it.",
            )


def _allow(
    scope: Construct,
    id: str,
    *,
    source: ec2.ISecurityGroup,
    target: ec2.ISecurityGroup,
    ports: tuple[int, int],
) -> None:
    """Ingress on ``target`` from ``source`` and the matching egress on ``source`` for the tcp
    port range ``ports``, both kept in this stack (so cross-stack groups make no cycle)."""
    from_port, to_port = ports
    ec2.CfnSecurityGroupIngress(
        scope,
        f"{id}In",
        group_id=target.security_group_id,
        source_security_group_id=source.security_group_id,
        ip_protocol="tcp",
        from_port=from_port,
        to_port=to_port,
        description=f"{id}: tcp {from_port}-{to_port}",
    )
    ec2.CfnSecurityGroupEgress(
        scope,
        f"{id}Out",
        group_id=source.security_group_id,
        destination_security_group_id=target.security_group_id,
        ip_protocol="tcp",
        from_port=from_port,
        to_port=to_port,
        description=f"{id}: tcp {from_port}-{to_port}",
    )
