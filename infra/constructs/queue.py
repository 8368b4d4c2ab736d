"""An SQS queue with its dead-letter queue and redrive policy, encrypted and TLS-only; and the
service's work queues."""

from __future__ import annotations

from typing import Any

from aws_cdk import Duration
from aws_cdk import aws_sqs as sqs

from constructs import Construct
from infra.config import StageConfig


class QueueWithDlq(Construct):
    """``queue`` redrives to ``dlq`` after ``max_receive_count`` receives."""

    def __init__(
        self,
        scope: Construct,
        id: str,
        *,
        queue_name: str,
        visibility_timeout_s: int,
        max_receive_count: int,
        dlq_retention_days: int,
        max_message_size_bytes: int | None = None,
    ) -> None:
        super().__init__(scope, id)
        # the DLQ takes what the queue takes (a message redriven either way always fits), both
        # encrypted and TLS-only
        alike: dict[str, Any] = {
            "max_message_size_bytes": max_message_size_bytes,
            "encryption": sqs.QueueEncryption.SQS_MANAGED,
            "enforce_ssl": True,
        }
        self.dlq = sqs.Queue(
            self,
            "Dlq",
            queue_name=f"{queue_name}-dlq",
            retention_period=Duration.days(dlq_retention_days),
            **alike,
        )
        self.queue = sqs.Queue(
            self,
            "Queue",
            queue_name=queue_name,
            visibility_timeout=Duration.seconds(visibility_timeout_s),
            retention_period=Duration.days(4),
            **alike,
            dead_letter_queue=sqs.DeadLetterQueue(
                queue=self.dlq, max_receive_count=max_receive_count
            ),
        )


class Queues:
    """The service's two work queues, each with its dead-letter queue: ingest (raw events to
    the ingest consumer) and extraction (transcripts the maintenance function extracts from).

    Built directly in ``scope`` (the stack), as every concern of the service is."""

    def __init__(self, scope: Construct, *, config: StageConfig) -> None:
        def work_queue(
            kind: str, visibility_timeout_s: int, max_message_size_bytes: int | None = None
        ) -> QueueWithDlq:
            """``engram-<stage>-<kind>``: the redrive and DLQ retention are the stage's."""
            return QueueWithDlq(
                scope,
                f"{kind.title()}Queue",
                queue_name=f"engram-{config.name}-{kind}",
                visibility_timeout_s=visibility_timeout_s,
                max_receive_count=config.max_receive_count,
                dlq_retention_days=config.dlq_retention_days,
                max_message_size_bytes=max_message_size_bytes,
            )

        self.ingest = work_queue(
            "ingest", config.ingest_visibility_timeout_s, config.ingest_max_message_bytes
        )
        self.extraction = work_queue("extraction", config.extraction_visibility_timeout_s)
