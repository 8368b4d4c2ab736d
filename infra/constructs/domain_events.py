"""Domain events: the stage's event bus, its archive and an example rule.

The events function publishes the outbox to the bus (docs/events.md). The archive keeps every
Engram event for replay; the example rule sends proposals waiting for review to a queue a
reviewer notifier would read."""

from __future__ import annotations

from aws_cdk import Duration
from aws_cdk import aws_events as events
from aws_cdk import aws_events_targets as targets

from constructs import Construct
from infra.config import StageConfig
from infra.constructs.queue import QueueWithDlq

EVENT_SOURCE = "engram"  # engram.events.models.SOURCE


class DomainEvents:
    """The bus, the archive and the review-notifications rule, built directly in ``scope``."""

    def __init__(self, scope: Construct, *, config: StageConfig) -> None:
        self.event_bus = events.EventBus(scope, "EventBus", event_bus_name=f"engram-{config.name}")
        self.event_archive = self.event_bus.archive(
            "EventArchive",
            archive_name=f"engram-{config.name}-events",
            description=f"Engram {config.name}: every domain event, for replay",
            event_pattern=events.EventPattern(source=[EVENT_SOURCE]),
            retention=Duration.days(config.event_archive_retention_days),
        )
        self.review_notifications = QueueWithDlq(
            scope,
            "ReviewNotifications",
            queue_name=f"engram-{config.name}-review-notifications",
            visibility_timeout_s=30,
            max_receive_count=config.max_receive_count,
            dlq_retention_days=config.dlq_retention_days,
        )
        self.proposals_rule = events.Rule(
            scope,
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
