"""Migration on deploy: a function that applies the PostgreSQL migrations (and creates or
updates the login role) as the master user, run by a trigger after the database and the proxy
exist and before any service function is updated."""

from __future__ import annotations

from collections.abc import Sequence

from aws_cdk import Duration, triggers
from aws_cdk import aws_lambda as lambda_

from constructs import Construct
from infra.bundling import migrate_function
from infra.config import FunctionConfig
from infra.constructs.functions import Functions


class Migration:
    """The migrate function and its trigger, built directly in ``scope`` (the stack)."""

    def __init__(
        self, scope: Construct, *, functions: Functions, before: Sequence[lambda_.Function]
    ) -> None:
        config, data = functions.config, functions.data
        migrate = functions.factory.make(
            migrate_function(functions.repo_root),
            FunctionConfig(memory_mb=512, timeout_s=config.migration_timeout_s),
            {
                **functions.base_env,
                "ENGRAM_DATABASE_URL": data.database_url,
                # the master logs in to migrate and to create or update the login role
                "ENGRAM_DATABASE_SECRET_ARN": data.database_secret.secret_arn,
                "ENGRAM_DATABASE_APP_SECRET_ARN": data.database_app_secret.secret_arn,
            },
        ).function
        data.database_secret.grant_read(migrate)
        data.database_app_secret.grant_read(migrate)
        self.trigger = triggers.Trigger(
            scope,
            "MigrateOnDeploy",
            handler=migrate,
            execute_on_handler_change=True,
            execute_after=[data.database_cluster, data.proxy],
            execute_before=list(before),
            timeout=Duration.seconds(config.migration_timeout_s),
        )
        self.function = migrate
