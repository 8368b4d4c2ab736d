"""The stage's CloudWatch dashboard: invocations, errors and throttles, p99 durations, queue
and DLQ depth, consolidation degradations, the event outbox and every alarm's state."""

from __future__ import annotations

from collections.abc import Mapping, Sequence

from aws_cdk import aws_cloudwatch as cloudwatch
from aws_cdk import aws_lambda as lambda_

from constructs import Construct
from infra.config import StageConfig
from infra.constructs.alarms import (
    DEGRADED_METRIC,
    FIVE_MINUTES,
    OUTBOX_AGE_METRIC,
    OUTBOX_DEPTH_METRIC,
    engram_metric,
)
from infra.constructs.queue import QueueWithDlq


class Dashboard:
    """One dashboard, built directly in ``scope`` (the stack)."""

    def __init__(
        self,
        scope: Construct,
        *,
        config: StageConfig,
        functions: Mapping[str, lambda_.Function],
        queues: Sequence[QueueWithDlq],
        alarms: Sequence[cloudwatch.IAlarm],
    ) -> None:
        self.dashboard = dashboard = cloudwatch.Dashboard(
            scope, "Dashboard", dashboard_name=f"engram-{config.name}"
        )
        fns = list(functions.values())
        dashboard.add_widgets(
            cloudwatch.GraphWidget(
                title="Invocations",
                left=[fn.metric_invocations(period=FIVE_MINUTES) for fn in fns],
                width=12,
            ),
            cloudwatch.GraphWidget(
                title="Errors and throttles",
                left=[fn.metric_errors(period=FIVE_MINUTES) for fn in fns],
                right=[fn.metric_throttles(period=FIVE_MINUTES) for fn in fns],
                width=12,
            ),
        )
        dashboard.add_widgets(
            cloudwatch.GraphWidget(
                title="Duration p99",
                left=[fn.metric_duration(period=FIVE_MINUTES, statistic="p99") for fn in fns],
                width=12,
            ),
            cloudwatch.GraphWidget(
                title="Queues (visible) and DLQs",
                left=[
                    pair.queue.metric_approximate_number_of_messages_visible(period=FIVE_MINUTES)
                    for pair in queues
                ],
                right=[
                    pair.dlq.metric_approximate_number_of_messages_visible(period=FIVE_MINUTES)
                    for pair in queues
                ],
                width=12,
            ),
        )
        dashboard.add_widgets(
            cloudwatch.GraphWidget(
                title="Consolidation degraded",
                left=[engram_metric(DEGRADED_METRIC, "Sum")],
                width=12,
            ),
            cloudwatch.GraphWidget(
                title="Event outbox: oldest waiting (s) and depth",
                left=[engram_metric(OUTBOX_AGE_METRIC)],
                right=[engram_metric(OUTBOX_DEPTH_METRIC)],
                width=12,
            ),
        )
        dashboard.add_widgets(
            cloudwatch.AlarmStatusWidget(title="Alarms", alarms=list(alarms), width=24),
        )
