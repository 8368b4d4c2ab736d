"""Data: Aurora Serverless v2 PostgreSQL 16 (pgvector) behind an RDS Proxy, and ElastiCache
Serverless Valkey with TLS and password auth. Retained and deletion-protected when the stage
config says so; whatever may be retained has a generated name, so a deploy after a failed one
or after a teardown never meets a leftover of the same name. The stack only composes the
database and the cache (``infra.constructs``)."""

from __future__ import annotations

from typing import Any

from aws_cdk import RemovalPolicies, Stack
from aws_cdk import aws_ec2 as ec2

from constructs import Construct
from infra.config import StageConfig
from infra.constructs.cache import Cache
from infra.constructs.common import removal_policy
from infra.constructs.database import Database
from infra.constructs.functions import DataEndpoints
from infra.stacks.network import APP_SUBNETS


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
        database = Database(
            self,
            config=config,
            vpc=vpc,
            subnets=ec2.SubnetSelection(subnet_type=APP_SUBNETS),
            functions_sg=functions_sg,
            endpoints_sg=endpoints_sg,
        )
        cache = Cache(
            self,
            config=config,
            vpc=vpc,
            subnet_ids=vpc.select_subnets(subnet_type=APP_SUBNETS).subnet_ids,
            functions_sg=functions_sg,
        )
        self.cluster, self.proxy, self.cache = database.cluster, database.proxy, cache.cache
        self.endpoints = DataEndpoints(
            database_url=database.database_url,
            database_secret=database.database_secret,
            database_app_secret=database.database_app_secret,
            database_cluster=database.cluster,
            proxy=database.proxy,
            redis_url=cache.redis_url,
            cache_key_prefix=cache.key_prefix,
            cache_user_id=cache.user_id,
            cache_secret=cache.secret,
        )
        """What the service stack needs of this one."""

        # Everything holding data or credentials follows the stage's retention value, including
        # the secret the cluster generates for itself and the subnet group a kept cluster is in.
        RemovalPolicies.of(self).apply(
            removal_policy(config.retain_data),
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
