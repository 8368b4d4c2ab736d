"""Functions: the dependencies layer, the review-cursor key and the service's Lambda functions,
each with its ENGRAM_* environment and only the grants it needs (least privilege), and the
ingest queue feeding the ingest consumer."""

from __future__ import annotations

from dataclasses import dataclass
from pathlib import Path

from aws_cdk import Aws, Duration
from aws_cdk import aws_ec2 as ec2
from aws_cdk import aws_iam as iam
from aws_cdk import aws_lambda as lambda_
from aws_cdk import aws_lambda_event_sources as sources
from aws_cdk import aws_rds as rds
from aws_cdk import aws_secretsmanager as secretsmanager

from constructs import Construct
from engram.api.mcp_routes import MCP_FUNCTION
from engram.bedrock_ids import ACTIONS as BEDROCK_ACTIONS
from engram.bedrock_ids import invoke_grants
from infra.bundling import app_function, dependencies_code
from infra.config import LAMBDA_FUNCTIONS, StageConfig
from infra.constructs.common import removal_policy
from infra.constructs.domain_events import DomainEvents
from infra.constructs.function import ARCHITECTURE, RUNTIME, FunctionFactory
from infra.constructs.identity import ADMIN_GROUP, TEAM_ADMIN_GROUP, TEAM_ATTRIBUTE
from infra.constructs.nag import acknowledge
from infra.constructs.queue import Queues

SERVICE_NAME = "engram"
METRICS_NAMESPACE = "Engram"

# The MCP function calls the public HTTP API with the caller's token and touches no store, so
# it runs outside the VPC (whose isolated subnets have no route to the internet).
OUTSIDE_VPC = frozenset({MCP_FUNCTION})

# What each function may touch (least privilege): data stores, queues, Bedrock.
REDIS_USERS = frozenset({"ingest", "ingest_consumer", "session", "memories", "maintenance"})
DATABASE_USERS = frozenset({"ingest", "session", "memories", "maintenance", "events"})
BEDROCK_USERS = frozenset({"session", "memories", "maintenance"})
INGEST_SENDERS = frozenset({"ingest"})
EXTRACTION_SENDERS = frozenset({"ingest"})
EXTRACTION_DEAD_LETTERERS = frozenset({"maintenance"})
CURSOR_SIGNERS = frozenset({"memories"})  # page cursors: GET /v1/review, GET /v1/memories/list
EVENT_PUBLISHERS = frozenset({"events"})  # PutEvents on the stage's bus (the outbox relay)


@dataclass(frozen=True)
class DataEndpoints:
    """What the service needs from the data stack."""

    database_url: str
    database_secret: secretsmanager.ISecret  # the master user's: the migration only
    database_app_secret: secretsmanager.ISecret  # the login role's: every function
    database_cluster: rds.DatabaseCluster
    proxy: rds.DatabaseProxy
    redis_url: str
    cache_key_prefix: str
    cache_user_id: str
    cache_secret: secretsmanager.ISecret


class Functions:
    """The API, queue and schedule functions of ``LAMBDA_FUNCTIONS``, built directly in
    ``scope`` (the stack); ``factory`` makes any further function the same way (from
    ``repo_root``), and ``base_env`` / ``redis_env`` are the environment parts they share."""

    def __init__(
        self,
        scope: Construct,
        *,
        config: StageConfig,
        repo_root: Path,
        vpc: ec2.IVpc,
        subnets: ec2.SubnetSelection,
        security_group: ec2.ISecurityGroup,
        data: DataEndpoints,
        queues: Queues,
        domain_events: DomainEvents,
        service_scope: str,
    ) -> None:
        self.config = config
        self.repo_root = repo_root
        self.data = data
        self.queues = queues
        self.domain_events = domain_events
        self.layer = lambda_.LayerVersion(
            scope,
            "Dependencies",
            code=dependencies_code(repo_root),
            compatible_architectures=[ARCHITECTURE],
            compatible_runtimes=[RUNTIME],
            description="Engram runtime dependencies from uv.lock",
        )
        # The HMAC key of review cursors: one per stage, shared by every instance of the
        # memories function, so any of them opens a cursor another issued.
        self.cursor_key = secretsmanager.Secret(
            scope,
            "CursorKey",
            description=f"Engram {config.name}: HMAC key of review cursors",
            generate_secret_string=secretsmanager.SecretStringGenerator(
                password_length=64, exclude_punctuation=True
            ),
            removal_policy=removal_policy(config.retain_data),
        )
        self.base_env = base_environment(config, service_scope)
        # No credential is ever in an environment: the functions read the cache's and the
        # database's from Secrets Manager at run time (cached, read again when refused), so a
        # rotation reaches warm containers without a deploy.
        self.redis_env = {
            "ENGRAM_REDIS_URL": data.redis_url,
            "ENGRAM_REDIS_TLS": "true",
            "ENGRAM_REDIS_CLUSTER": "true",  # ElastiCache Serverless speaks cluster mode only
            "ENGRAM_REDIS_KEY_PREFIX": data.cache_key_prefix,  # the prefix the cache ACL grants
            "ENGRAM_REDIS_SECRET_ARN": data.cache_secret.secret_arn,
        }
        self.factory = FunctionFactory(
            scope=scope,
            config=config,
            layer=self.layer,
            vpc=vpc,
            subnets=subnets,
            security_group=security_group,
            outside_vpc=OUTSIDE_VPC,
        )
        self.functions: dict[str, lambda_.Function] = {}
        for name in LAMBDA_FUNCTIONS:
            construct = self.factory.make(
                app_function(name, repo_root), config.function(name), self.environment(name)
            )
            self.functions[name] = construct.function
            self._grant(name, construct.function)
        self._consume_queues()
        acknowledge(
            self.cursor_key,
            "AwsSolutions-SMG4",
            "The review-cursor HMAC key signs short-lived page cursors only; rotating it just "
            "invalidates cursors in flight (clients restart a listing). Rotate by putting a new "
            "secret value and redeploying the memories function (docs/deployment.md).",
        )

    def environment(self, name: str) -> dict[str, str]:
        """The ENGRAM_* environment of the function ``name``: what it touches, nothing else."""
        config, data, queues = self.config, self.data, self.queues
        env = dict(self.base_env)
        env.update(self.redis_env if name in REDIS_USERS else {})
        if name in DATABASE_USERS:
            env["ENGRAM_DATABASE_URL"] = data.database_url
            env["ENGRAM_DATABASE_SECRET_ARN"] = data.database_app_secret.secret_arn
        if name not in OUTSIDE_VPC:
            env["ENGRAM_INGEST_QUEUE_URL"] = queues.ingest.queue.queue_url
            env["ENGRAM_EXTRACTION_QUEUE_URL"] = queues.extraction.queue.queue_url
        if name in INGEST_SENDERS:  # its messages are at most what the queue accepts
            env["ENGRAM_INGEST_MAX_MESSAGE_BYTES"] = str(config.ingest_max_message_bytes)
        if name in CURSOR_SIGNERS:
            env["ENGRAM_CURSOR_KEY_SECRET_ARN"] = self.cursor_key.secret_arn
        if name in EVENT_PUBLISHERS:
            env["ENGRAM_EVENT_BUS_NAME"] = self.domain_events.event_bus.event_bus_name
            env["ENGRAM_EVENTS_RELAY_RUN_S"] = str(config.events_relay_run_s)
        if name in EXTRACTION_DEAD_LETTERERS:
            env["ENGRAM_EXTRACTION_DLQ_URL"] = queues.extraction.dlq.queue_url
            # dead-letter on the delivery SQS would be the last before its own redrive
            env["ENGRAM_EXTRACTION_MAX_RECEIVES"] = str(config.max_receive_count)
        return env

    def _consume_queues(self) -> None:
        config = self.config
        # The consumer (and its event source) is updated before the ingest functions: a new
        # message shape is only ever sent once the consumer that reads it is deployed
        # (CloudFormation would otherwise update them in parallel).
        for sender in INGEST_SENDERS:
            self.functions[sender].node.add_dependency(self.functions["ingest_consumer"])
        self.functions["ingest_consumer"].add_event_source(
            sources.SqsEventSource(
                self.queues.ingest.queue,
                batch_size=config.ingest_batch_size,
                max_batching_window=Duration.seconds(config.ingest_batch_window_s),
                report_batch_item_failures=True,
                max_concurrency=config.ingest_max_concurrency,
            )
        )
        # The maintenance function drains the extraction queue itself (it polls) and moves a
        # transcript that keeps failing to the DLQ itself (Settings.extraction_max_receives,
        # never above the queue's own maxReceiveCount). Runs are serialised by a lease in Redis
        # (engram.maintenance.lease), so no concurrency needs reserving; a stage may still
        # reserve some (maintenance_reserved_concurrency).
        maintenance = self.functions["maintenance"]
        self.queues.extraction.queue.grant_consume_messages(maintenance)
        if config.maintenance_reserved_concurrency is not None:
            cfn_maintenance = maintenance.node.default_child
            assert isinstance(cfn_maintenance, lambda_.CfnFunction)
            cfn_maintenance.reserved_concurrent_executions = config.maintenance_reserved_concurrency

    def _grant(self, name: str, fn: lambda_.Function) -> None:
        data, queues = self.data, self.queues
        if name in REDIS_USERS:
            data.cache_secret.grant_read(fn)
        if name in DATABASE_USERS:
            data.database_app_secret.grant_read(fn)
        if name in CURSOR_SIGNERS:
            self.cursor_key.grant_read(fn)
        if name in INGEST_SENDERS:
            queues.ingest.queue.grant_send_messages(fn)
        if name in EXTRACTION_SENDERS:
            queues.extraction.queue.grant_send_messages(fn)
        if name in EXTRACTION_DEAD_LETTERERS:
            queues.extraction.dlq.grant_send_messages(fn)
        if name in EVENT_PUBLISHERS:
            self.domain_events.event_bus.grant_put_events_to(fn)
        if name in BEDROCK_USERS:
            for model in bedrock_models(self.config):
                grant_bedrock(fn, model)


def base_environment(config: StageConfig, service_scope: str) -> dict[str, str]:
    """The environment every Engram function (and the migration) has: stage, logging, the
    token claims and groups the API reads, the embedder and extractor."""
    return {
        "ENGRAM_STAGE": config.name,
        "ENGRAM_LOG_LEVEL": config.log_level,
        "ENGRAM_TEAM_CLAIM": f"custom:{TEAM_ATTRIBUTE}",
        "ENGRAM_GROUPS_CLAIM": "cognito:groups",
        "ENGRAM_ADMIN_GROUP": ADMIN_GROUP,
        "ENGRAM_TEAM_ADMIN_GROUP": TEAM_ADMIN_GROUP,
        "ENGRAM_SERVICE_SCOPE": service_scope,
        "ENGRAM_EMBEDDER": config.embedder,
        "ENGRAM_EMBEDDING_DIMENSIONS": str(config.embedding_dimensions),
        "ENGRAM_EXTRACTOR": config.extractor,
        "ENGRAM_BEDROCK_EMBEDDING_MODEL_ID": config.bedrock_embedding_model_id,
        "ENGRAM_BEDROCK_EXTRACTION_MODEL_ID": config.bedrock_extraction_model_id,
        "POWERTOOLS_SERVICE_NAME": SERVICE_NAME,
        "POWERTOOLS_METRICS_NAMESPACE": METRICS_NAMESPACE,
        "POWERTOOLS_LOG_LEVEL": config.log_level,
    }


def grant_bedrock(fn: lambda_.Function, model_id: str) -> None:
    """InvokeModel on a foundation model in this region; or on an inference profile and,
    through that profile only, on its foundation model in every region it routes to
    (``engram.bedrock_ids.invoke_grants``)."""
    grants = invoke_grants(
        model_id, partition=Aws.PARTITION, region=Aws.REGION, account=Aws.ACCOUNT_ID
    )
    for grant in grants:
        fn.add_to_role_policy(
            iam.PolicyStatement(
                actions=list(BEDROCK_ACTIONS),
                resources=list(grant.resources),
                conditions=dict(grant.condition) if grant.condition else None,
            )
        )
        routed = [r for r in grant.resources if ":bedrock:*:" in r]
        for resource in routed:
            finding = resource.replace(Aws.PARTITION, "<AWS::Partition>")
            acknowledge(
                fn,
                f"AwsSolutions-IAM5[Resource::{finding}]",
                "A cross-region inference profile routes each request to its foundation "
                "model in any region of its geography, so the model is granted in every "
                "region, and only through this profile (bedrock:InferenceProfileArn).",
            )


def bedrock_models(config: StageConfig) -> tuple[str, ...]:
    """The Bedrock models the stage's functions call (none: no grant, no endpoint)."""
    return tuple(
        model
        for model, used in (
            (config.bedrock_embedding_model_id, config.embedder == "bedrock"),
            (config.bedrock_extraction_model_id, config.extractor == "bedrock"),
        )
        if used
    )
