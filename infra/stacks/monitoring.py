"""Monitoring: alarms to an encrypted SNS topic (which also hears when each alarm is OK again)
and one dashboard. Alarms: DLQ depth and queue age, per-function errors, throttles and p99
duration, consolidation degradations, maintenance invocations given up on, API 5xx and p99
latency, Aurora ACU utilisation and connections, RDS Proxy availability, cache throttling, and
the event outbox (age of the oldest unpublished event, depth, dead entries)."""

from __future__ import annotations

from typing import Any

from aws_cdk import Duration, Stack
from aws_cdk import aws_cloudwatch as cloudwatch
from aws_cdk import aws_cloudwatch_actions as actions
from aws_cdk import aws_iam as iam
from aws_cdk import aws_kms as kms
from aws_cdk import aws_sns as sns
from aws_cdk import aws_sns_subscriptions as subscriptions

from constructs import Construct
from infra.config import StageConfig
from infra.constructs.common import removal_policy
from infra.stacks.data import DataStack
from infra.stacks.service import METRICS_NAMESPACE, SERVICE_NAME, ServiceStack

DEGRADED_METRIC = "ConsolidationDegraded"
"""EMF metric (Powertools, namespace ``Engram``, dimension ``service=engram``) the session
function emits once per session start that answered degraded."""

FIVE_MINUTES = Duration.minutes(5)

OUTBOX_AGE_METRIC = "OutboxOldestAgeSeconds"
OUTBOX_DEPTH_METRIC = "OutboxDepth"
OUTBOX_DEAD_METRIC = "OutboxDeadEntries"
"""EMF metrics the events function emits on every run (``functions/events/handler.py``)."""


class MonitoringStack(Stack):
    """Alarms and the dashboard of one stage."""

    def __init__(
        self,
        scope: Construct,
        id: str,
        *,
        config: StageConfig,
        service: ServiceStack,
        data: DataStack,
        **kwargs: Any,
    ) -> None:
        super().__init__(scope, id, **kwargs)

        key = kms.Key(
            self,
            "AlarmsKey",
            description="Engram alarm topic",
            enable_key_rotation=True,
            removal_policy=removal_policy(config.retain_data),
        )
        key.grant(
            iam.ServicePrincipal("cloudwatch.amazonaws.com"), "kms:Decrypt", "kms:GenerateDataKey*"
        )
        self.topic = sns.Topic(
            self,
            "Alarms",
            display_name=f"Engram {config.name} alarms",
            master_key=key,
            enforce_ssl=True,
        )
        for email in [config.alarm_email] if config.alarm_email else []:
            self.topic.add_subscription(subscriptions.EmailSubscription(email))
        action = actions.SnsAction(self.topic)

        self.alarms: list[cloudwatch.Alarm] = []

        def alarm(
            id: str,
            metric: cloudwatch.IMetric,
            threshold: float,
            what: str,
            *,
            below: bool = False,
            periods: int = 1,
            missing: cloudwatch.TreatMissingData = cloudwatch.TreatMissingData.NOT_BREACHING,
        ) -> None:
            created = cloudwatch.Alarm(
                self,
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
                alarm_description=f"Engram {config.name}: {what}",
            )
            created.add_alarm_action(action)
            created.add_ok_action(action)
            self.alarms.append(created)

        for queue_id, pair in (("Ingest", service.ingest), ("Extraction", service.extraction)):
            alarm(
                f"{queue_id}DlqDepth",
                pair.dlq.metric_approximate_number_of_messages_visible(
                    period=Duration.minutes(1), statistic="Maximum"
                ),
                1,
                f"messages in the {queue_id.lower()} dead-letter queue",
            )
            alarm(
                f"{queue_id}OldestMessage",
                pair.queue.metric_approximate_age_of_oldest_message(
                    period=FIVE_MINUTES, statistic="Maximum"
                ),
                15 * 60,
                f"{queue_id.lower()} queue not drained for 15 minutes",
            )

        for name, fn in service.functions.items():
            label = "".join(part.capitalize() for part in name.split("_"))
            timeout_ms = config.function(name).timeout_s * 1000
            alarm(
                f"{label}Errors",
                fn.metric_errors(period=FIVE_MINUTES, statistic="Sum"),
                config.alarm_error_threshold,
                f"{name} errors",
            )
            alarm(
                f"{label}Throttles",
                fn.metric_throttles(period=FIVE_MINUTES, statistic="Sum"),
                1,
                f"{name} throttled",
            )
            alarm(
                f"{label}DurationP99",
                fn.metric_duration(period=FIVE_MINUTES, statistic="p99"),
                timeout_ms * config.alarm_p99_fraction_of_timeout,
                f"{name} p99 duration near its timeout",
            )

        # A rotation step that fails leaves the cache secret's rotation unfinished (retried by
        # Secrets Manager); any error is worth a look.
        alarm(
            "CacheRotationErrors",
            service.cache_rotation_function.metric_errors(period=FIVE_MINUTES, statistic="Sum"),
            1,
            "cache secret rotation step failed (see the rotate-cache function's logs)",
        )
        alarm(
            "MaintenanceFailures",
            service.maintenance_failures.metric_approximate_number_of_messages_visible(
                period=Duration.minutes(1), statistic="Maximum"
            ),
            1,
            "maintenance invocations Lambda gave up on (see the maintenance-failures queue)",
        )

        # --- the HTTP API ----------------------------------------------------------------
        alarm(
            "Api5xx",
            service.api.metric_server_error(period=FIVE_MINUTES, statistic="Sum"),
            config.alarm_api_5xx_threshold,
            "HTTP API 5xx responses",
        )
        alarm(
            "ApiLatencyP99",
            service.api.metric_latency(period=FIVE_MINUTES, statistic="p99"),
            config.alarm_api_latency_p99_ms,
            "HTTP API p99 latency",
            periods=3,
        )

        # --- Aurora, the proxy and the cache ------------------------------------------------
        alarm(
            "AuroraAcuUtilization",
            data.cluster.metric_acu_utilization(period=FIVE_MINUTES, statistic="Maximum"),
            config.alarm_aurora_acu_utilization_percent,
            "Aurora near its maximum ACUs (raise aurora_max_acu)",
            periods=3,
        )
        alarm(
            "AuroraConnections",
            data.cluster.metric_database_connections(period=FIVE_MINUTES, statistic="Maximum"),
            config.alarm_database_connections,
            "connections to Aurora",
            periods=3,
        )
        alarm(
            "ProxyAvailability",
            cloudwatch.Metric(
                namespace="AWS/RDS",
                metric_name="AvailabilityPercentage",
                dimensions_map={
                    "ProxyName": data.proxy.db_proxy_name,
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
        alarm(
            "CacheThrottledCommands",
            cloudwatch.Metric(
                namespace="AWS/ElastiCache",
                metric_name="ThrottledCmds",
                dimensions_map={"clusterId": data.cache.ref},
                period=FIVE_MINUTES,
                statistic="Sum",
            ),
            config.alarm_cache_throttled_commands,
            "ElastiCache throttling commands (raise cache_max_ecpu_per_second)",
        )

        degraded = cloudwatch.Metric(
            namespace=METRICS_NAMESPACE,
            metric_name=DEGRADED_METRIC,
            dimensions_map={"service": SERVICE_NAME},
            period=FIVE_MINUTES,
            statistic="Sum",
        )
        alarm(
            "ConsolidationDegraded",
            degraded,
            config.alarm_degraded_threshold,
            "session starts answering degraded (consolidation timeout or store errors)",
        )

        # --- the event outbox ---------------------------------------------------------------
        def engram_metric(name: str, statistic: str = "Maximum") -> cloudwatch.Metric:
            return cloudwatch.Metric(
                namespace=METRICS_NAMESPACE,
                metric_name=name,
                dimensions_map={"service": SERVICE_NAME},
                period=FIVE_MINUTES,
                statistic=statistic,
            )

        outbox_age = engram_metric(OUTBOX_AGE_METRIC)
        outbox_depth = engram_metric(OUTBOX_DEPTH_METRIC)
        # the relay reports every minute: no data means it stopped, which is breaching too
        alarm(
            "OutboxAge",
            outbox_age,
            config.alarm_outbox_age_s,
            "events waiting in the outbox too long (or the events function stopped reporting)",
            missing=cloudwatch.TreatMissingData.BREACHING,
        )
        alarm(
            "OutboxDepth",
            outbox_depth,
            config.alarm_outbox_depth,
            "events piling up in the outbox",
        )
        alarm(
            "OutboxDeadEntries",
            engram_metric(OUTBOX_DEAD_METRIC),
            1,
            "events EventBridge kept refusing are dead (docs/events.md: dead entries)",
        )

        dashboard = cloudwatch.Dashboard(self, "Dashboard", dashboard_name=f"engram-{config.name}")
        functions = service.functions.values()
        dashboard.add_widgets(
            cloudwatch.GraphWidget(
                title="Invocations",
                left=[fn.metric_invocations(period=FIVE_MINUTES) for fn in functions],
                width=12,
            ),
            cloudwatch.GraphWidget(
                title="Errors and throttles",
                left=[fn.metric_errors(period=FIVE_MINUTES) for fn in functions],
                right=[fn.metric_throttles(period=FIVE_MINUTES) for fn in functions],
                width=12,
            ),
        )
        dashboard.add_widgets(
            cloudwatch.GraphWidget(
                title="Duration p99",
                left=[fn.metric_duration(period=FIVE_MINUTES, statistic="p99") for fn in functions],
                width=12,
            ),
            cloudwatch.GraphWidget(
                title="Queues (visible) and DLQs",
                left=[
                    pair.queue.metric_approximate_number_of_messages_visible(period=FIVE_MINUTES)
                    for pair in (service.ingest, service.extraction)
                ],
                right=[
                    pair.dlq.metric_approximate_number_of_messages_visible(period=FIVE_MINUTES)
                    for pair in (service.ingest, service.extraction)
                ],
                width=12,
            ),
        )
        dashboard.add_widgets(
            cloudwatch.GraphWidget(title="Consolidation degraded", left=[degraded], width=12),
            cloudwatch.GraphWidget(
                title="Event outbox: oldest waiting (s) and depth",
                left=[outbox_age],
                right=[outbox_depth],
                width=12,
            ),
        )
        dashboard.add_widgets(
            cloudwatch.AlarmStatusWidget(title="Alarms", alarms=self.alarms, width=24),
        )
