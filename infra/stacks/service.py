"""Service: the Lambdas, the HTTP API with a Cognito JWT authorizer, the queues, the schedules,
the deploy-time migration and the console's hosting. The stack only composes the concerns of
``infra.constructs``."""

from __future__ import annotations

from pathlib import Path
from typing import Any

from aws_cdk import CfnOutput, Stack
from aws_cdk import aws_ec2 as ec2

from constructs import Construct
from infra.config import StageConfig
from infra.constructs.cache_rotation import CacheRotation
from infra.constructs.console import ConsoleHosting, console_config
from infra.constructs.domain_events import DomainEvents
from infra.constructs.functions import DataEndpoints, Functions
from infra.constructs.http_api import HttpApi
from infra.constructs.identity import (
    RESOURCE_SERVER_ID,
    TEAM_SCOPE_PREFIX,
    Identity,
    construct_suffix,
    hosted_ui_url,
)
from infra.constructs.migration import Migration
from infra.constructs.nag import acknowledge
from infra.constructs.queue import Queues
from infra.constructs.schedules import Schedules
from infra.stacks.network import APP_SUBNETS


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
        console_assets: Path | None = None,
        **kwargs: Any,
    ) -> None:
        """``console_assets``: the console's AWS build to host (none: no console)."""
        super().__init__(scope, id, **kwargs)
        self.config = config
        queues = Queues(self, config=config)
        self.ingest, self.extraction = queues.ingest, queues.extraction
        self.console = (
            ConsoleHosting(
                self,
                "Console",
                config=config,
                assets=console_assets,
                hosted_ui=hosted_ui_url(config),
            )
            if console_assets is not None
            else None
        )
        self.identity = Identity(
            self, config=config, console_url=self.console.url if self.console else None
        )
        self.user_pool = self.identity.user_pool
        self.web_client = self.identity.web_client
        self.service_client = self.identity.service_client
        self.team_clients = self.identity.team_clients
        self.service_scope = self.identity.service_scope
        domain_events = DomainEvents(self, config=config)
        self.event_bus = domain_events.event_bus
        self.event_archive = domain_events.event_archive
        self.review_notifications = domain_events.review_notifications
        functions = Functions(
            self,
            config=config,
            repo_root=repo_root,
            vpc=vpc,
            subnets=ec2.SubnetSelection(subnet_type=APP_SUBNETS),
            security_group=functions_sg,
            data=data,
            queues=queues,
            domain_events=domain_events,
            service_scope=self.service_scope,
        )
        self.functions = functions.functions
        schedules = Schedules(self, config=config, functions=self.functions)
        self.maintenance_failures = schedules.maintenance_failures
        migration = Migration(self, functions=functions, before=list(self.functions.values()))
        self.migration, self.migrate_function = migration.trigger, migration.function
        self.cache_rotation_function = CacheRotation(self, functions=functions).function
        http_api = HttpApi(self, config=config, identity=self.identity, functions=self.functions)
        self.authorizer, self.api, self.stage = http_api.authorizer, http_api.api, http_api.stage
        if self.console is not None:
            self._serve_console(self.console)
        self._outputs()
        acknowledge(
            self,
            "AwsSolutions-L1",
            "Python 3.12 is pinned on purpose: the dependency wheels are built for cp312 and "
            "the bundle is proven by importing it on a local CPython 3.12.",
        )

    def _serve_console(self, console: ConsoleHosting) -> None:
        """The API behind the console's ``/v1/*``, and its assets with ``config.json``."""
        console.route_api(self.api)
        console.deploy(
            config_json=console_config(
                hosted_ui=hosted_ui_url(self.config),
                client_id=self.web_client.user_pool_client_id,
                url=console.url,
            )
        )

    def _outputs(self) -> None:
        """What a client or an operator needs to reach the stage."""
        outputs = {
            "ApiUrl": self.stage.url,
            "UserPoolId": self.user_pool.user_pool_id,
            "WebClientId": self.web_client.user_pool_client_id,
            "ServiceClientId": self.service_client.user_pool_client_id,
            "TokenUrl": f"{self.identity.domain.base_url()}/oauth2/token",
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
        if self.console is not None:
            outputs["ConsoleUrl"] = self.console.url
            outputs["ConsoleDistributionId"] = self.console.distribution.distribution_id
            outputs["HostedUiUrl"] = hosted_ui_url(self.config)
        for output_id, value in outputs.items():
            CfnOutput(self, output_id, value=value)
        for team, client in self.team_clients.items():
            CfnOutput(
                self,
                f"ServiceClientId{construct_suffix(team)}",
                value=client.user_pool_client_id,
                description=f"Service client of team {team} (scopes {self.service_scope} "
                f"{RESOURCE_SERVER_ID}/{TEAM_SCOPE_PREFIX}{team})",
            )
