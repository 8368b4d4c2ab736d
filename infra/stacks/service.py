"""Service: the Lambdas, the HTTP API with a Cognito JWT authorizer, the queues, the schedules and
the deploy-time migration."""

from __future__ import annotations

import hashlib
import json
from collections.abc import Mapping
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import jsii
from aws_cdk import Aws, CfnOutput, Duration, Stack, triggers
from aws_cdk import aws_apigateway as apigw
from aws_cdk import aws_apigatewayv2 as apigwv2
from aws_cdk import aws_certificatemanager as acm
from aws_cdk import aws_cognito as cognito
from aws_cdk import aws_ec2 as ec2
from aws_cdk import aws_events as events
from aws_cdk import aws_events_targets as targets
from aws_cdk import aws_iam as iam
from aws_cdk import aws_lambda as lambda_
from aws_cdk import aws_lambda_destinations as destinations
from aws_cdk import aws_lambda_event_sources as sources
from aws_cdk import aws_logs as logs
from aws_cdk import aws_rds as rds
from aws_cdk import aws_secretsmanager as secretsmanager
from aws_cdk import aws_sqs as sqs
from aws_cdk.aws_apigatewayv2_authorizers import HttpJwtAuthorizer
from aws_cdk.aws_apigatewayv2_integrations import HttpLambdaIntegration

from constructs import Construct
from engram.api.mcp_routes import MCP_FUNCTION, MCP_ROUTES
from engram.api.models import IDEMPOTENCY_HEADER
from engram.api.routes import CATCH_ALL, CATCH_ALL_FUNCTION
from engram.api.routes import ROUTES as API_ROUTES
from engram.bedrock_ids import ACTIONS as BEDROCK_ACTIONS
from engram.bedrock_ids import invoke_grants
from engram.settings import Settings
from infra.bundling import FunctionSpec, app_function, dependencies_code, migrate_function
from infra.config import CACHE_ROTATION_FUNCTION, LAMBDA_FUNCTIONS, FunctionConfig, StageConfig
from infra.constructs.common import log_retention, removal_policy
from infra.constructs.function import ARCHITECTURE, RUNTIME, EngramFunction
from infra.constructs.nag import acknowledge
from infra.constructs.queue import QueueWithDlq
from infra.stacks.network import APP_SUBNETS

SERVICE_NAME = "engram"
METRICS_NAMESPACE = "Engram"
RESOURCE_SERVER_ID = "engram"
SERVICE_SCOPE_NAME = "service"
TEAM_ATTRIBUTE = "team"  # the token claim is custom:team
TEAM_SCOPE_PREFIX = "team."  # engram/team.<team>: a service token's team (engram.api.identity)
ADMIN_GROUP = "engram-admins"
TEAM_ADMIN_GROUP = "engram-team-admins"


@dataclass(frozen=True)
class Route:
    method: apigwv2.HttpMethod
    path: str
    function: str
    authorized: bool = True


ANY = apigwv2.HttpMethod.ANY

# The API Gateway routes are the route table's (engram.api.routes), plus the catch-all: every
# other /v1 path goes to the memories function, which answers it with the API's JSON 404.
ROUTES: tuple[Route, ...] = (
    *(
        Route(apigwv2.HttpMethod(r.method), r.path, r.function, authorized=r.auth)
        for r in API_ROUTES
    ),
    Route(ANY, CATCH_ALL, CATCH_ALL_FUNCTION),
    # the MCP function (engram.api.mcp_routes): POST /mcp, and its public sign-in metadata
    *(
        Route(apigwv2.HttpMethod(key.split(" ")[0]), key.split(" ")[1], MCP_FUNCTION, auth)
        for key, auth in MCP_ROUTES.items()
    ),
)

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
EVENT_SOURCE = "engram"  # engram.events.models.SOURCE

CACHE_ROTATION_TIMEOUT_S = 900
"""One rotation step may wait for the ElastiCache user to be active before and after
ModifyUser (minutes at most); a step that times out is retried by Secrets Manager."""


def cors_allowed_headers() -> list[str]:
    """Request headers a browser may send: the token, the body's type, the ingest
    ``Idempotency-Key`` (retries told from repeats), ``If-Match`` and the act-as header a
    service token names its user by. The ingest key and the act-as header are read from
    their one definition in the service, so the preflight cannot drift from what the
    functions read."""
    act_as = Settings.model_fields["act_as_header"].default
    return [
        "authorization",
        "content-type",
        IDEMPOTENCY_HEADER.lower(),
        "if-match",  # edits of a memory only apply to the version read
        str(act_as).lower(),
    ]


SCHEDULES: dict[str, str] = {
    "MaintenanceFrequent": "frequent",  # extraction drain, pruning
    "MaintenanceDaily": "daily",  # decay sweep of idle identities, retention policies
}
"""Rule id -> the ``engramSchedule`` field of the event the maintenance function receives."""
EVENTS_SCHEDULE = "EventsRelay"
"""Rule id of the events function's schedule."""


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


class ServiceStack(Stack):
    """Lambdas, API, identity, queues, schedules and migration for one stage."""

    def __init__(
        self,
        scope: Construct,
        id: str,
        *,
        config: StageConfig,
        repo_root: Path,
        vpc: ec2.IVpc,
        functions_sg: ec2.ISecurityGroup,
        data: DataEndpoints,
        **kwargs: Any,
    ) -> None:
        super().__init__(scope, id, **kwargs)
        self.config = config
        subnets = ec2.SubnetSelection(subnet_type=APP_SUBNETS)
        removal = removal_policy(config.retain_data)

        # --- queues ------------------------------------------------------------------------
        self.ingest = QueueWithDlq(
            self,
            "IngestQueue",
            queue_name=f"engram-{config.name}-ingest",
            visibility_timeout_s=config.ingest_visibility_timeout_s,
            max_receive_count=config.max_receive_count,
            dlq_retention_days=config.dlq_retention_days,
        )
        self.extraction = QueueWithDlq(
            self,
            "ExtractionQueue",
            queue_name=f"engram-{config.name}-extraction",
            visibility_timeout_s=config.extraction_visibility_timeout_s,
            max_receive_count=config.max_receive_count,
            dlq_retention_days=config.dlq_retention_days,
        )

        # --- identity ----------------------------------------------------------------------
        self.user_pool = cognito.UserPool(
            self,
            "Users",
            user_pool_name=f"engram-{config.name}",
            self_sign_up_enabled=False,
            sign_in_aliases=cognito.SignInAliases(email=True),
            auto_verify=cognito.AutoVerifiedAttrs(email=True),
            custom_attributes={
                TEAM_ATTRIBUTE: cognito.StringAttribute(min_len=1, max_len=128, mutable=True)
            },
            password_policy=cognito.PasswordPolicy(
                min_length=14,
                require_digits=True,
                require_lowercase=True,
                require_uppercase=True,
                require_symbols=True,
            ),
            mfa=getattr(cognito.Mfa, config.mfa),
            mfa_second_factor=cognito.MfaSecondFactor(otp=True, sms=False),
            account_recovery=cognito.AccountRecovery.EMAIL_ONLY,
            feature_plan=cognito.FeaturePlan.PLUS,
            standard_threat_protection_mode=(
                cognito.StandardThreatProtectionMode.FULL_FUNCTION
                if config.threat_protection == "ENFORCED"
                else cognito.StandardThreatProtectionMode.AUDIT_ONLY
            ),
            deletion_protection=config.deletion_protection,
            removal_policy=removal,
        )
        # Groups the API reads from cognito:groups (Settings.admin_group / team_admin_group).
        for group_id, group_name, description in (
            ("AdminsGroup", ADMIN_GROUP, "Engram administrators (review, personas)"),
            ("TeamAdminsGroup", TEAM_ADMIN_GROUP, "Team administrators (team settings)"),
        ):
            cognito.CfnUserPoolGroup(
                self,
                group_id,
                user_pool_id=self.user_pool.user_pool_id,
                group_name=group_name,
                description=description,
            )
        service_scope = cognito.ResourceServerScope(
            scope_name=SERVICE_SCOPE_NAME,
            scope_description="Machine clients acting for users of their own team",
        )
        # A client-credentials token has no team claim: the API takes the service's team from
        # exactly one scope engram/team.<team> (engram.api.identity), one per configured team.
        team_scopes = {
            team: cognito.ResourceServerScope(
                scope_name=f"{TEAM_SCOPE_PREFIX}{team}",
                scope_description=f"Machine clients of team {team}",
            )
            for team in config.service_teams
        }
        resource_server = self.user_pool.add_resource_server(
            "Api",
            identifier=RESOURCE_SERVER_ID,
            scopes=[service_scope, *team_scopes.values()],
        )
        self.service_scope = f"{RESOURCE_SERVER_ID}/{SERVICE_SCOPE_NAME}"
        domain = self.user_pool.add_domain(
            "Domain",
            cognito_domain=cognito.CognitoDomainOptions(
                domain_prefix=config.cognito_domain_prefix
                or f"engram-{config.name}-{Aws.ACCOUNT_ID}"
            ),
        )
        # End users (chat frontends): SRP sign-in, no client secret, no hosted OAuth flows.
        # Nobody but an admin (AdminUpdateUserAttributes) may set custom:team.
        self.web_client = self.user_pool.add_client(
            "WebClient",
            generate_secret=False,
            auth_flows=cognito.AuthFlow(user_srp=True),
            disable_o_auth=True,
            prevent_user_existence_errors=True,
            write_attributes=cognito.ClientAttributes().with_standard_attributes(
                email=True, fullname=True
            ),
        )
        # Chat backends: client credentials with the service scope. This client's tokens carry
        # no team: they are accepted only once a pre-token-generation trigger (V3, not part of
        # this stack) adds the team claim. Each configured team also gets its own client
        # granted the service scope and exactly one team scope.
        self.service_client = self.user_pool.add_client(
            "ServiceClient",
            generate_secret=True,
            o_auth=cognito.OAuthSettings(
                flows=cognito.OAuthFlows(client_credentials=True),
                scopes=[cognito.OAuthScope.resource_server(resource_server, service_scope)],
            ),
            prevent_user_existence_errors=True,
        )
        self.team_clients: dict[str, cognito.UserPoolClient] = {
            team: self.user_pool.add_client(
                f"ServiceClient{_construct_suffix(team)}",
                user_pool_client_name=f"engram-{config.name}-service-{team}",
                generate_secret=True,
                o_auth=cognito.OAuthSettings(
                    flows=cognito.OAuthFlows(client_credentials=True),
                    scopes=[
                        cognito.OAuthScope.resource_server(resource_server, service_scope),
                        cognito.OAuthScope.resource_server(resource_server, scope),
                    ],
                ),
                prevent_user_existence_errors=True,
            )
            for team, scope in team_scopes.items()
        }

        # --- domain events: the bus, its archive and an example rule ----------------------
        # The events function publishes the outbox here (docs/events.md). The archive keeps
        # every Engram event for replay; the example rule sends proposals waiting for review
        # to a queue a reviewer notifier would read.
        self.event_bus = events.EventBus(self, "EventBus", event_bus_name=f"engram-{config.name}")
        self.event_archive = self.event_bus.archive(
            "EventArchive",
            archive_name=f"engram-{config.name}-events",
            description=f"Engram {config.name}: every domain event, for replay",
            event_pattern=events.EventPattern(source=[EVENT_SOURCE]),
            retention=Duration.days(config.event_archive_retention_days),
        )
        self.review_notifications = QueueWithDlq(
            self,
            "ReviewNotifications",
            queue_name=f"engram-{config.name}-review-notifications",
            visibility_timeout_s=30,
            max_receive_count=config.max_receive_count,
            dlq_retention_days=config.dlq_retention_days,
        )
        self.proposals_rule = events.Rule(
            self,
            "ProposalsForReview",
            event_bus=self.event_bus,
            description="Example: memory.proposed (schema version 1) to the review notifications",
            event_pattern=events.EventPattern(
                source=[EVENT_SOURCE],
                detail_type=["memory.proposed"],
                detail={"schemaVersion": [1]},
            ),
            targets=[
                targets.SqsQueue(
                    self.review_notifications.queue,
                    dead_letter_queue=self.review_notifications.dlq,
                    retry_attempts=8,
                    max_event_age=Duration.hours(24),
                )
            ],
        )

        # --- functions ---------------------------------------------------------------------
        self.layer = lambda_.LayerVersion(
            self,
            "Dependencies",
            code=dependencies_code(repo_root),
            compatible_architectures=[ARCHITECTURE],
            compatible_runtimes=[RUNTIME],
            description="Engram runtime dependencies from uv.lock",
        )
        # The HMAC key of review cursors: one per stage, shared by every instance of the
        # memories function, so any of them opens a cursor another issued.
        self.cursor_key = secretsmanager.Secret(
            self,
            "CursorKey",
            description=f"Engram {config.name}: HMAC key of review cursors",
            generate_secret_string=secretsmanager.SecretStringGenerator(
                password_length=64, exclude_punctuation=True
            ),
            removal_policy=removal,
        )
        base_env: dict[str, str] = {
            "ENGRAM_STAGE": config.name,
            "ENGRAM_LOG_LEVEL": config.log_level,
            "ENGRAM_TEAM_CLAIM": f"custom:{TEAM_ATTRIBUTE}",
            "ENGRAM_GROUPS_CLAIM": "cognito:groups",
            "ENGRAM_ADMIN_GROUP": ADMIN_GROUP,
            "ENGRAM_TEAM_ADMIN_GROUP": TEAM_ADMIN_GROUP,
            "ENGRAM_SERVICE_SCOPE": self.service_scope,
            "ENGRAM_EMBEDDER": config.embedder,
            "ENGRAM_EMBEDDING_DIMENSIONS": str(config.embedding_dimensions),
            "ENGRAM_EXTRACTOR": config.extractor,
            "ENGRAM_BEDROCK_EMBEDDING_MODEL_ID": config.bedrock_embedding_model_id,
            "ENGRAM_BEDROCK_EXTRACTION_MODEL_ID": config.bedrock_extraction_model_id,
            "POWERTOOLS_SERVICE_NAME": SERVICE_NAME,
            "POWERTOOLS_METRICS_NAMESPACE": METRICS_NAMESPACE,
            "POWERTOOLS_LOG_LEVEL": config.log_level,
        }
        # No credential is ever in an environment: the functions read the cache's and the
        # database's from Secrets Manager at run time (cached, read again when refused), so a
        # rotation reaches warm containers without a deploy.
        redis_env = {
            "ENGRAM_REDIS_URL": data.redis_url,
            "ENGRAM_REDIS_TLS": "true",
            "ENGRAM_REDIS_CLUSTER": "true",  # ElastiCache Serverless speaks cluster mode only
            "ENGRAM_REDIS_KEY_PREFIX": data.cache_key_prefix,  # the prefix the cache ACL grants
            "ENGRAM_REDIS_SECRET_ARN": data.cache_secret.secret_arn,
        }
        database_env = {
            "ENGRAM_DATABASE_URL": data.database_url,
            "ENGRAM_DATABASE_SECRET_ARN": data.database_app_secret.secret_arn,
        }
        queue_env = {
            "ENGRAM_INGEST_QUEUE_URL": self.ingest.queue.queue_url,
            "ENGRAM_EXTRACTION_QUEUE_URL": self.extraction.queue.queue_url,
        }

        def environment(name: str) -> dict[str, str]:
            env = dict(base_env)
            env.update(redis_env if name in REDIS_USERS else {})
            env.update(database_env if name in DATABASE_USERS else {})
            env.update(queue_env if name not in OUTSIDE_VPC else {})
            if name in CURSOR_SIGNERS:
                env["ENGRAM_CURSOR_KEY_SECRET_ARN"] = self.cursor_key.secret_arn
            if name in EVENT_PUBLISHERS:
                env["ENGRAM_EVENT_BUS_NAME"] = self.event_bus.event_bus_name
                env["ENGRAM_EVENTS_RELAY_RUN_S"] = str(config.events_relay_run_s)
            if name in EXTRACTION_DEAD_LETTERERS:
                env["ENGRAM_EXTRACTION_DLQ_URL"] = self.extraction.dlq.queue_url
                # dead-letter on the delivery SQS would be the last before its own redrive
                env["ENGRAM_EXTRACTION_MAX_RECEIVES"] = str(config.max_receive_count)
            return env

        def make(
            spec: FunctionSpec,
            sizing: FunctionConfig,
            env: Mapping[str, str],
            wildcard_reason: str | None = None,
        ) -> Any:
            return EngramFunction(
                self,
                _pascal(spec.name),
                spec=spec,
                sizing=sizing,
                layer=self.layer,
                vpc=None if spec.name in OUTSIDE_VPC else vpc,
                subnets=None if spec.name in OUTSIDE_VPC else subnets,
                security_group=None if spec.name in OUTSIDE_VPC else functions_sg,
                environment=env,
                log_retention_days=config.log_retention_days,
                retain_logs=config.retain_logs,
                tracing=config.tracing,
                function_name=f"engram-{config.name}-{spec.name.replace('_', '-')}",
                wildcard_reason=wildcard_reason,
            )

        self.functions: dict[str, lambda_.Function] = {}
        for name in LAMBDA_FUNCTIONS:
            construct = make(
                app_function(name, repo_root), config.function(name), environment(name)
            )
            self.functions[name] = construct.function
            self._grant(name, construct.function, data)

        # --- queues -> functions -----------------------------------------------------------
        self.functions["ingest_consumer"].add_event_source(
            sources.SqsEventSource(
                self.ingest.queue,
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
        self.extraction.queue.grant_consume_messages(maintenance)
        if config.maintenance_reserved_concurrency is not None:
            cfn_maintenance = maintenance.node.default_child
            assert isinstance(cfn_maintenance, lambda_.CfnFunction)
            cfn_maintenance.reserved_concurrent_executions = config.maintenance_reserved_concurrency
        # Asynchronous invocations (the schedules): Lambda retries a failed run, drops events
        # too old to matter, and records what it gave up on in this queue (alarmed).
        self.maintenance_failures = sqs.Queue(
            self,
            "MaintenanceFailures",
            queue_name=f"engram-{config.name}-maintenance-failures",
            retention_period=Duration.days(config.dlq_retention_days),
            encryption=sqs.QueueEncryption.SQS_MANAGED,
            enforce_ssl=True,
        )
        maintenance.configure_async_invoke(
            retry_attempts=config.maintenance_retry_attempts,
            max_event_age=Duration.seconds(config.maintenance_max_event_age_s),
            on_failure=destinations.SqsDestination(self.maintenance_failures),
        )
        acknowledge(
            self.maintenance_failures,
            "AwsSolutions-SQS3",
            "This queue is itself a dead-letter destination: Lambda's on-failure destination "
            "for maintenance invocations it gave up on. Nothing consumes it; an alarm watches it.",
        )

        # --- schedules ---------------------------------------------------------------------
        every = events.Schedule.rate(Duration.minutes(config.maintenance_every_minutes))
        daily = events.Schedule.cron(minute="0", hour=str(config.daily_sweep_hour_utc))
        for rule_id, schedule in (("MaintenanceFrequent", every), ("MaintenanceDaily", daily)):
            events.Rule(
                self,
                rule_id,
                description=f"Engram maintenance ({SCHEDULES[rule_id]})",
                schedule=schedule,
                targets=[
                    targets.LambdaFunction(
                        self.functions["maintenance"],
                        event=events.RuleTargetInput.from_object(
                            {"engramSchedule": SCHEDULES[rule_id]}
                        ),
                        retry_attempts=2,
                        max_event_age=Duration.hours(1),
                    )
                ],
            )

        # The events function every minute: each run publishes the outbox and keeps polling
        # it (events_relay_run_s), so events are on the bus about a second after they commit.
        # A failed run is not retried: the next minute's run takes over (claims are leased).
        relay = self.functions["events"]
        relay.configure_async_invoke(retry_attempts=0, max_event_age=Duration.minutes(2))
        events.Rule(
            self,
            EVENTS_SCHEDULE,
            description="Engram events: publish the outbox to the bus",
            schedule=events.Schedule.rate(Duration.minutes(config.events_every_minutes)),
            targets=[
                targets.LambdaFunction(relay, retry_attempts=0, max_event_age=Duration.minutes(2))
            ],
        )

        # --- migration on deploy -----------------------------------------------------------
        migrate = make(
            migrate_function(repo_root),
            FunctionConfig(memory_mb=512, timeout_s=config.migration_timeout_s),
            {
                **base_env,
                "ENGRAM_DATABASE_URL": data.database_url,
                # the master logs in to migrate and to create or update the login role
                "ENGRAM_DATABASE_SECRET_ARN": data.database_secret.secret_arn,
                "ENGRAM_DATABASE_APP_SECRET_ARN": data.database_app_secret.secret_arn,
            },
        ).function
        data.database_secret.grant_read(migrate)
        data.database_app_secret.grant_read(migrate)
        self.migration = triggers.Trigger(
            self,
            "MigrateOnDeploy",
            handler=migrate,
            execute_on_handler_change=True,
            execute_after=[data.database_cluster, data.proxy],
            execute_before=list(self.functions.values()),
            timeout=Duration.seconds(config.migration_timeout_s),
        )
        self.migrate_function = migrate

        # --- rotation of the cache password ------------------------------------------------
        # Secrets Manager invokes this function for each step of a rotation of the cache secret
        # (engram.adapters.cache_rotation): the ElastiCache user holds the current and the
        # pending password while the secret switches, then only the new one; the functions
        # read the secret again when refused. No deploy is part of a rotation.
        rotation = make(
            app_function(CACHE_ROTATION_FUNCTION, repo_root),
            FunctionConfig(memory_mb=256, timeout_s=CACHE_ROTATION_TIMEOUT_S),
            {
                **base_env,
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
            self,
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
        self.cache_rotation_function = rotation

        # --- HTTP API ----------------------------------------------------------------------
        issuer = f"https://cognito-idp.{Aws.REGION}.amazonaws.com/{self.user_pool.user_pool_id}"
        self.authorizer = HttpJwtAuthorizer(
            "Jwt",
            issuer,
            authorizer_name="cognito",
            jwt_audience=[
                self.web_client.user_pool_client_id,
                self.service_client.user_pool_client_id,
                *(c.user_pool_client_id for c in self.team_clients.values()),
            ],
        )
        self.api = apigwv2.HttpApi(
            self,
            "Api",
            api_name=f"engram-{config.name}",
            create_default_stage=False,
            default_authorizer=self.authorizer,
            cors_preflight=(
                apigwv2.CorsPreflightOptions(
                    allow_origins=list(config.cors_allowed_origins),
                    allow_headers=cors_allowed_headers(),
                    # a browser reads a memory's version and a 429's wait from these
                    expose_headers=["etag", "retry-after"],
                    allow_methods=[
                        apigwv2.CorsHttpMethod.GET,
                        apigwv2.CorsHttpMethod.POST,
                        apigwv2.CorsHttpMethod.PUT,
                        apigwv2.CorsHttpMethod.PATCH,
                        apigwv2.CorsHttpMethod.DELETE,
                    ],
                    max_age=Duration.hours(1),
                )
                if config.cors_allowed_origins
                else None
            ),
        )
        access_logs = logs.LogGroup(
            self,
            "ApiAccessLogs",
            retention=log_retention(config.log_retention_days),
            removal_policy=removal_policy(config.retain_logs),
        )
        custom_domain = (
            apigwv2.DomainName(
                self,
                "ApiDomain",
                domain_name=config.domain_name,
                certificate=acm.Certificate.from_certificate_arn(
                    self, "ApiCertificate", config.certificate_arn
                ),
            )
            if config.domain_name and config.certificate_arn
            else None
        )
        self.stage = apigwv2.HttpStage(
            self,
            "DefaultStage",
            http_api=self.api,
            stage_name="$default",
            auto_deploy=True,
            throttle=apigwv2.ThrottleSettings(
                rate_limit=config.api_throttle_rate, burst_limit=config.api_throttle_burst
            ),
            access_log_settings=_AccessLogSettings(access_logs),
            domain_mapping=(
                apigwv2.DomainMappingOptions(domain_name=custom_domain) if custom_domain else None
            ),
        )
        integrations = {
            name: HttpLambdaIntegration(f"{_pascal(name)}Integration", fn)
            for name, fn in self.functions.items()
        }
        # The MCP function calls the API it serves, and names the user pool as the issuer
        # remote MCP clients sign in with (its protected-resource metadata).
        mcp = self.functions[MCP_FUNCTION]
        mcp.add_environment("ENGRAM_API_URL", self.api.api_endpoint)
        mcp.add_environment("ENGRAM_OAUTH_ISSUER", issuer)  # the authorizer's issuer
        for route in ROUTES:
            self.api.add_routes(
                path=route.path,
                methods=[route.method],
                integration=integrations[route.function],
                authorizer=None if route.authorized else apigwv2.HttpNoneAuthorizer(),
            )

        # --- outputs a client needs --------------------------------------------------------
        outputs = {
            "ApiUrl": self.stage.url,
            "UserPoolId": self.user_pool.user_pool_id,
            "WebClientId": self.web_client.user_pool_client_id,
            "ServiceClientId": self.service_client.user_pool_client_id,
            "TokenUrl": f"{domain.base_url()}/oauth2/token",
            "ServiceScope": self.service_scope,
            "IngestQueueName": self.ingest.queue.queue_name,
            "ExtractionQueueName": self.extraction.queue.queue_name,
            "IngestDlqName": self.ingest.dlq.queue_name,
            "ExtractionDlqName": self.extraction.dlq.queue_name,
            "MaintenanceFailuresQueueName": self.maintenance_failures.queue_name,
            "EventBusName": self.event_bus.event_bus_name,
            "EventBusArn": self.event_bus.event_bus_arn,
            "EventArchiveName": self.event_archive.archive_name,
            "ReviewNotificationsQueueName": self.review_notifications.queue.queue_name,
        }
        for output_id, value in outputs.items():
            CfnOutput(self, output_id, value=value)
        for team, client in self.team_clients.items():
            CfnOutput(
                self,
                f"ServiceClientId{_construct_suffix(team)}",
                value=client.user_pool_client_id,
                description=f"Service client of team {team} (scopes {self.service_scope} "
                f"{RESOURCE_SERVER_ID}/{TEAM_SCOPE_PREFIX}{team})",
            )

        self._acknowledge()

    # -----------------------------------------------------------------------------------------

    def _grant(self, name: str, fn: lambda_.Function, data: DataEndpoints) -> None:
        if name in REDIS_USERS:
            data.cache_secret.grant_read(fn)
        if name in DATABASE_USERS:
            data.database_app_secret.grant_read(fn)
        if name in CURSOR_SIGNERS:
            self.cursor_key.grant_read(fn)
        if name in INGEST_SENDERS:
            self.ingest.queue.grant_send_messages(fn)
        if name in EXTRACTION_SENDERS:
            self.extraction.queue.grant_send_messages(fn)
        if name in EXTRACTION_DEAD_LETTERERS:
            self.extraction.dlq.grant_send_messages(fn)
        if name in EVENT_PUBLISHERS:
            self.event_bus.grant_put_events_to(fn)
        if name in BEDROCK_USERS:
            for model in bedrock_models(self.config):
                self._grant_bedrock(fn, model)

    def _grant_bedrock(self, fn: lambda_.Function, model_id: str) -> None:
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

    def _acknowledge(self) -> None:
        """Findings accepted on purpose, each with its reason (cdk-nag AwsSolutions)."""
        config = self.config
        public = {
            "--v1--health": "GET /v1/health is deliberately public: load balancers and uptime "
            "checks call it without a token; it returns only store status.",
            "--v1--openapi.json": "GET /v1/openapi.json is deliberately public: it is the API's "
            "published description (docs/openapi.json) and holds no data.",
            "--oauth-protected-resource--mcp": "The MCP endpoint's OAuth protected-resource "
            "metadata (RFC 9728) is public by definition: a client reads it before it has a "
            "token, to find the user pool to sign in with; it holds only the endpoint and issuer.",
        }
        for route in self.api.node.children:
            for suffix, reason in public.items():
                if route.node.id.endswith(suffix):
                    acknowledge(route, "AwsSolutions-APIG4", reason)
        acknowledge(
            self.cursor_key,
            "AwsSolutions-SMG4",
            "The review-cursor HMAC key signs short-lived page cursors only; rotating it just "
            "invalidates cursors in flight (clients restart a listing). Rotate by putting a new "
            "secret value and redeploying the memories function (docs/deployment.md).",
        )
        acknowledge(
            self,
            "AwsSolutions-L1",
            "Python 3.12 is pinned on purpose: the dependency wheels are built for cp312 and "
            "the bundle is proven by importing it on a local CPython 3.12.",
        )
        if config.mfa != "REQUIRED":
            acknowledge(
                self.user_pool,
                "AwsSolutions-COG2",
                "This stage's config makes MFA optional for test users of a non-production "
                "stage; prod requires it.",
            )
        if config.threat_protection != "ENFORCED":
            acknowledge(
                self.user_pool,
                "AwsSolutions-COG3",
                "This stage's config runs Cognito threat protection in audit mode to avoid "
                "blocking automated test sign-ins; prod enforces it.",
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


ACCESS_LOG_FIELDS: dict[str, str] = {
    "requestId": "$context.requestId",
    "requestTime": "$context.requestTime",
    "routeKey": "$context.routeKey",
    "status": "$context.status",
    "protocol": "$context.protocol",
    "ip": "$context.identity.sourceIp",
    "sub": "$context.authorizer.claims.sub",
    "responseLength": "$context.responseLength",
    "responseLatency": "$context.responseLatency",
    "integrationLatency": "$context.integrationLatency",
    "integrationStatus": "$context.integrationStatus",
    "integrationError": "$context.integrationErrorMessage",
    "error": "$context.error.message",
}
"""One JSON line per request. HTTP APIs have no resource path or IAM user: the route key and
the JWT's subject say what was called and by whom."""


@jsii.implements(apigwv2.IAccessLogSettings)
class _AccessLogSettings:
    """HTTP API access logs: JSON, one line per request, to a CloudWatch log group."""

    def __init__(self, log_group: logs.ILogGroup) -> None:
        self._destination = apigwv2.LogGroupLogDestination(log_group)

    @property
    def destination(self) -> apigwv2.IAccessLogDestination:
        return self._destination

    @property
    def format(self) -> apigw.AccessLogFormat:
        return apigw.AccessLogFormat.custom(json.dumps(ACCESS_LOG_FIELDS))


def _pascal(name: str) -> str:
    return "".join(part.capitalize() for part in name.split("_"))


def _construct_suffix(team: str) -> str:
    """A stable, unique construct/output id part for a team id (``acme-eu`` -> ``TeamAcmeeu``
    plus a short hash, so ``acme-eu`` and ``acmeeu`` never collide)."""
    readable = "".join(ch for ch in team.title() if ch.isalnum())[:40]
    return f"Team{readable}{hashlib.sha256(team.encode()).hexdigest()[:8]}"
