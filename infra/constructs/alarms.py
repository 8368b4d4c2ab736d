"""Alarms to an encrypted SNS topic, which also hears when each alarm is OK again: DLQ depth
and queue age, per-function errors, throttles and p99 duration, consolidation degradations,
maintenance invocations given up on, API 5xx and p99 latency, Aurora ACU utilisation and
connections, RDS Proxy availability, cache throttling, and the event outbox (age of the oldest
unpublished event, depth, dead entries)."""

from __future__ import annotations

from collections.abc import Mapping

from aws_cdk import Duration
from aws_cdk import aws_apigatewayv2 as apigwv2
from aws_cdk import aws_cloudwatch as cloudwatch
from aws_cdk import aws_cloudwatch_actions as actions
from aws_cdk import aws_elasticache as elasticache
from aws_cdk import aws_iam as iam
from aws_cdk import aws_kms as kms
from aws_cdk import aws_lambda as lambda_
from aws_cdk import aws_rds as rds
from aws_cdk import aws_sns as sns
from aws_cdk import aws_sns_subscriptions as subscriptions
from aws_cdk import aws_sqs as sqs

from constructs import Construct
from infra.config import StageConfig
from infra.constructs.common import removal_policy
from infra.constructs.function import pascal
from infra.constructs.functions import METRICS_NAMESPACE, SERVICE_NAME
from infra.constructs.queue import QueueWithDlq

DEGRADED_METRIC = "ConsolidationDegraded"
"""EMF metric (Powertools, namespace ``Engram``, dimension ``service=engram``) the session
function emits once per session start that answered degraded."""

FIVE_MINUTES = Duration.minutes(5)

OUTBOX_AGE_METRIC = "OutboxOldestAgeSeconds"
OUTBOX_DEPTH_METRIC = "OutboxDepth"
OUTBOX_DEAD_METRIC = "OutboxDeadEntries"
"""EMF metrics the events function emits on every run (``functions/events/handler.py``)."""


def engram_metric(name: str, statistic: str = "Maximum") -> cloudwatch.Metric:
    """One of the service's own EMF metrics over five minutes."""
    return cloudwatch.Metric(
        namespace=METRICS_NAMESPACE,
        metric_name=name,
        dimensions_map={"service": SERVICE_NAME},
        period=FIVE_MINUTES,
        statistic=statistic,
    )


class Alarms:
    """The topic and every alarm of the stage, built directly in ``scope`` (the stack)."""

    def __init__(
        self,
        scope: Construct,
        *,
        config: StageConfig,
        queues: Mapping[str, QueueWithDlq],
        functions: Mapping[str, lambda_.Function],
        cache_rotation: lambda_.IFunction,
        maintenance_failures: sqs.IQueue,
        api: apigwv2.HttpApi,
        cluster: rds.DatabaseCluster,
        proxy: rds.DatabaseProxy,
        cache: elasticache.CfnServerlessCache,
    ) -> None:
        self._scope = scope
        self._config = config
        key = kms.Key(
            scope,
            "AlarmsKey",
            description="Engram alarm topic",
            enable_key_rotation=True,
            removal_policy=removal_policy(config.retain_data),
        )
        key.grant(
            iam.ServicePrincipal("cloudwatch.amazonaws.com"), "kms:Decrypt", "kms:GenerateDataKey*"
        )
        self.topic = sns.Topic(
            scope,
            "Alarms",
            display_name=f"Engram {config.name} alarms",
            master_key=key,
            enforce_ssl=True,
        )
        for email in [config.alarm_email] if config.alarm_email else []:
            self.topic.add_subscription(subscriptions.EmailSubscription(email))
        self._action = actions.SnsAction(self.topic)
        self.alarms: list[cloudwatch.Alarm] = []
        self._queues(queues)
        self._functions(functions, cache_rotation, maintenance_failures)
        self._api(api)
        self._data(cluster, proxy, cache)
        self._outbox()

    def alarm(
        self,
        id: str,
        metric: cloudwatch.IMetric,
        threshold: float,
        what: str,
        *,
        below: bool = False,
        periods: int = 1,
        missing: cloudwatch.TreatMissingData = cloudwatch.TreatMissingData.NOT_BREACHING,
    ) -> None:
        """An alarm on ``metric`` (at or above ``threshold``, or below it) telling the topic
        when it fires and when it is OK again."""
        created = cloudwatch.Alarm(
            self._scope,
            id,
            metric=metric,
            threshold=threshold,
            evaluation_periods=periods,
            comparison_operator=(
                cloudwatch.ComparisonOperator.LESS_THAN_THRESHOLD
                if below
                else cloudwatch.ComparisonOperator.GREATER_THAN_OR_EQUAL_TO_THRESHOLD
            ),
            treat_missing_data=missing,
            alarm_description=f"Engram {self._config.name}: {what}",
        )
        created.add_alarm_action(self._action)
        created.add_ok_action(self._action)
        self.alarms.append(created)

    def _queues(self, queues: Mapping[str, QueueWithDlq]) -> None:
        for queue_id, pair in queues.items():
            self.alarm(
                f"{queue_id}DlqDepth",
                pair.dlq.metric_approximate_number_of_messages_visible(
                    period=Duration.minutes(1), statistic="Maximum"
                ),
                1,
                f"messages in the {queue_id.lower()} dead-letter queue",
            )
            self.alarm(
                f"{queue_id}OldestMessage",
                pair.queue.metric_approximate_age_of_oldest_message(
                    period=FIVE_MINUTES, statistic="Maximum"
                ),
                15 * 60,
                f"{queue_id.lower()} queue not drained for 15 minutes",
            )

    def _functions(
        self,
        functions: Mapping[str, lambda_.Function],
        cache_rotation: lambda_.IFunction,
        maintenance_failures: sqs.IQueue,
    ) -> None:
        config = self._config
        for name, fn in functions.items():
            label = pascal(name)
            timeout_ms = config.function(name).timeout_s * 1000
            self.alarm(
                f"{label}Errors",
                fn.metric_errors(period=FIVE_MINUTES, statistic="Sum"),
                config.alarm_error_threshold,
                f"{name} errors",
            )
            self.alarm(
                f"{label}Throttles",
                fn.metric_throttles(period=FIVE_MINUTES, statistic="Sum"),
                1,
                f"{name} throttled",
            )
            self.alarm(
                f"{label}DurationP99",
                fn.metric_duration(period=FIVE_MINUTES, statistic="p99"),
                timeout_ms * config.alarm_p99_fraction_of_timeout,
                f"{name} p99 duration near its timeout",
            )
        # A rotation step that fails leaves the cache secret's rotation unfinished (retried by
        # Secrets Manager); any error is worth a look.
        self.alarm(
            "CacheRotationErrors",
            cache_rotation.metric_errors(period=FIVE_MINUTES, statistic="Sum"),
            1,
            "cache secret rotation step failed (see the rotate-cache function's logs)",
        )
        self.alarm(
            "MaintenanceFailures",
            maintenance_failures.metric_approximate_number_of_messages_visible(
                period=Duration.minutes(1), statistic="Maximum"
            ),
            1,
            "maintenance invocations Lambda gave up on (see the maintenance-failures queue)",
        )

    def _api(self, api: apigwv2.HttpApi) -> None:
        config = self._config
        self.alarm(
            "Api5xx",
            api.metric_server_error(period=FIVE_MINUTES, statistic="Sum"),
            config.alarm_api_5xx_threshold,
            "HTTP API 5xx responses",
        )
        self.alarm(
            "ApiLatencyP99",
            api.metric_latency(period=FIVE_MINUTES, statistic="p99"),
            config.alarm_api_latency_p99_ms,
            "HTTP API p99 latency",
            periods=3,
        )

    def _data(
        self,
        cluster: rds.DatabaseCluster,
        proxy: rds.DatabaseProxy,
        cache: elasticache.CfnServerlessCache,
    ) -> None:
        config = self._config
        aurora = (
            (
                "AuroraAcuUtilization",
                cluster.metric_acu_utilization,
                config.alarm_aurora_acu_utilization_percent,
                "Aurora near its maximum ACUs (raise aurora_max_acu)",
            ),
            (
                "AuroraConnections",
                cluster.metric_database_connections,
                config.alarm_database_connections,
                "connections to Aurora",
            ),
        )
        for id, metric, threshold, what in aurora:  # the highest of each 5 minutes, 15 minutes long
            self.alarm(
                id, metric(period=FIVE_MINUTES, statistic="Maximum"), threshold, what, periods=3
            )
        self.alarm(
            "ProxyAvailability",
            cloudwatch.Metric(
                namespace="AWS/RDS",
                metric_name="AvailabilityPercentage",
                dimensions_map={
                    "ProxyName": proxy.db_proxy_name,
                    "TargetGroup": "default",
                    "TargetRole": "READ_WRITE",
                },
                period=FIVE_MINUTES,
                statistic="Minimum",
            ),
            config.alarm_proxy_availability_percent,
            "RDS Proxy cannot reach the Aurora writer",
            below=True,
        )
        self.alarm(
            "CacheThrottledCommands",
            cloudwatch.Metric(
                namespace="AWS/ElastiCache",
                metric_name="ThrottledCmds",
                dimensions_map={"clusterId": cache.ref},
                period=FIVE_MINUTES,
                statistic="Sum",
            ),
            config.alarm_cache_throttled_commands,
            "ElastiCache throttling commands (raise cache_max_ecpu_per_second)",
        )
        self.alarm(
            "ConsolidationDegraded",
            engram_metric(DEGRADED_METRIC, "Sum"),
            config.alarm_degraded_threshold,
            "session starts answering degraded (consolidation timeout or store errors)",
        )

    def _outbox(self) -> None:
        config = self._config
        # the relay reports every minute: no data means it stopped, which is breaching too
        self.alarm(
            "OutboxAge",
            engram_metric(OUTBOX_AGE_METRIC),
            config.alarm_outbox_age_s,
            "events waiting in the outbox too long (or the events function stopped reporting)",
            missing=cloudwatch.TreatMissingData.BREACHING,
        )
        self.alarm(
            "OutboxDepth",
            engram_metric(OUTBOX_DEPTH_METRIC),
            config.alarm_outbox_depth,
            "events piling up in the outbox",
        )
        self.alarm(
            "OutboxDeadEntries",
            engram_metric(OUTBOX_DEAD_METRIC),
            1,
            "events EventBridge kept refusing are dead (docs/events.md: dead entries)",
        )
