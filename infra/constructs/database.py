"""Database: Aurora Serverless v2 PostgreSQL 16 (pgvector) behind an RDS Proxy, its PostgreSQL
log group, and its two secrets (the master's and the service login role's), both rotated every
30 days by the single-user rotation function."""

from __future__ import annotations

from aws_cdk import Duration, Fn
from aws_cdk import aws_ec2 as ec2
from aws_cdk import aws_logs as logs
from aws_cdk import aws_rds as rds
from aws_cdk import aws_secretsmanager as secretsmanager

from constructs import Construct
from infra.config import StageConfig
from infra.constructs.common import allow_tcp, log_retention, removal_policy
from infra.constructs.nag import acknowledge

POSTGRES_PORT = 5432
DATABASE_NAME = "engram"
DATABASE_APP_USER = "engram_service"
"""The functions' login role (``engram.adapters.postgres.login_role``; never the master)."""
# A current Aurora PostgreSQL 16 minor: new clusters cannot be created on deprecated minors
# (cfn-lint W3690 knows which), and the migrations are tested on PostgreSQL 16.
POSTGRES_VERSION = rds.AuroraPostgresEngineVersion.VER_16_13


class Database:
    """The cluster, its proxy and secrets, built directly in ``scope`` (the stack), so their
    construct paths (and the rotation functions' generated names) do not depend on how the code
    is grouped. Only ``functions_sg`` reaches the proxy; only the proxy reaches the cluster."""

    def __init__(
        self,
        scope: Construct,
        *,
        config: StageConfig,
        vpc: ec2.IVpc,
        subnets: ec2.SubnetSelection,
        functions_sg: ec2.ISecurityGroup,
        endpoints_sg: ec2.ISecurityGroup,
    ) -> None:
        db_sg = ec2.SecurityGroup(
            scope, "DatabaseSg", vpc=vpc, description="Aurora cluster", allow_all_outbound=False
        )
        proxy_sg = ec2.SecurityGroup(
            scope, "ProxySg", vpc=vpc, description="RDS Proxy", allow_all_outbound=False
        )
        rotation_sg = ec2.SecurityGroup(
            scope,
            "RotationSg",
            vpc=vpc,
            description="Database secret rotation function",
            allow_all_outbound=False,
        )
        postgres = (POSTGRES_PORT, POSTGRES_PORT)
        allow_tcp(scope, "FunctionsToProxy", source=functions_sg, target=proxy_sg, ports=postgres)
        allow_tcp(
            scope, "RotationToEndpoints", source=rotation_sg, target=endpoints_sg, ports=(443, 443)
        )
        self.cluster = _cluster(scope, config, vpc=vpc, subnets=subnets, security_group=db_sg)
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
            scope,
            "DatabaseAppSecret",
            username=DATABASE_APP_USER,
            dbname=DATABASE_NAME,
        ).attach(self.cluster)
        secretsmanager.SecretRotation(
            scope,
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
        acknowledge(
            self.cluster,
            "AwsSolutions-RDS11",
            "The cluster sits in isolated subnets and only the proxy security group may reach it; "
            "moving PostgreSQL off 5432 would add no protection and break standard tooling.",
        )
        # A stage value, not a stage name, decides whether this finding exists at all.
        if not config.deletion_protection:
            acknowledge(
                self.cluster,
                "AwsSolutions-RDS10",
                "This stage's config disables deletion protection so that a disposable "
                "development stage can be torn down; prod enables it.",
            )


def _cluster(
    scope: Construct,
    config: StageConfig,
    *,
    vpc: ec2.IVpc,
    subnets: ec2.SubnetSelection,
    security_group: ec2.ISecurityGroup,
) -> rds.DatabaseCluster:
    """The Aurora cluster and the log group it exports PostgreSQL logs to. No cluster
    identifier and no secret name: CloudFormation generates both."""
    cluster = rds.DatabaseCluster(
        scope,
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
        security_groups=[security_group],
        storage_encrypted=True,
        iam_authentication=True,
        deletion_protection=config.deletion_protection,
        removal_policy=removal_policy(config.retain_data),
        backup=rds.BackupProps(retention=Duration.days(config.backup_retention_days)),
        cloudwatch_logs_exports=["postgresql"],
    )
    # The log group RDS exports to, created here (not with cloudwatch_logs_retention) so no
    # log-retention custom resource with broad IAM permissions is needed. Its name follows
    # the generated cluster identifier; the instances (the only writers of PostgreSQL logs)
    # wait for it, so RDS never creates it first.
    postgres_logs = logs.LogGroup(
        scope,
        "PostgresLogs",
        log_group_name=Fn.join(
            "", ["/aws/rds/cluster/", cluster.cluster_identifier, "/postgresql"]
        ),
        retention=log_retention(config.log_retention_days),
        removal_policy=removal_policy(config.retain_logs),
    )
    for instance in cluster.node.children:
        if isinstance(instance.node.default_child, rds.CfnDBInstance):
            instance.node.add_dependency(postgres_logs)
    return cluster
