"""Schedules: the maintenance function's frequent and daily runs (with their failure queue)
and the events function's relay run every minute."""

from __future__ import annotations

from collections.abc import Mapping

from aws_cdk import Duration
from aws_cdk import aws_events as events
from aws_cdk import aws_events_targets as targets
from aws_cdk import aws_lambda as lambda_
from aws_cdk import aws_lambda_destinations as destinations
from aws_cdk import aws_sqs as sqs

from constructs import Construct
from infra.config import StageConfig
from infra.constructs.nag import acknowledge

SCHEDULES: dict[str, str] = {
    "MaintenanceFrequent": "frequent",  # extraction drain, pruning
    "MaintenanceDaily": "daily",  # decay sweep of idle identities, retention policies
}
"""Rule id -> the ``engramSchedule`` field of the event the maintenance function receives."""
EVENTS_SCHEDULE = "EventsRelay"
"""Rule id of the events function's schedule."""


class Schedules:
    """The EventBridge schedules of ``functions`` (``maintenance`` and ``events``), built
    directly in ``scope`` (the stack)."""

    def __init__(
        self,
        scope: Construct,
        *,
        config: StageConfig,
        functions: Mapping[str, lambda_.Function],
    ) -> None:
        maintenance = functions["maintenance"]
        # Asynchronous invocations (the schedules): Lambda retries a failed run, drops events
        # too old to matter, and records what it gave up on in this queue (alarmed).
        self.maintenance_failures = sqs.Queue(
            scope,
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

        every = events.Schedule.rate(Duration.minutes(config.maintenance_every_minutes))
        daily = events.Schedule.cron(minute="0", hour=str(config.daily_sweep_hour_utc))
        for rule_id, schedule in (("MaintenanceFrequent", every), ("MaintenanceDaily", daily)):
            events.Rule(
                scope,
                rule_id,
                description=f"Engram maintenance ({SCHEDULES[rule_id]})",
                schedule=schedule,
                targets=[
                    targets.LambdaFunction(
                        maintenance,
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
        relay = functions["events"]
        relay.configure_async_invoke(retry_attempts=0, max_event_age=Duration.minutes(2))
        events.Rule(
            scope,
            EVENTS_SCHEDULE,
            description="Engram events: publish the outbox to the bus",
            schedule=events.Schedule.rate(Duration.minutes(config.events_every_minutes)),
            targets=[
                targets.LambdaFunction(relay, retry_attempts=0, max_event_age=Duration.minutes(2))
            ],
        )
