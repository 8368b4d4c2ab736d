"""An SQS queue with its dead-letter queue and redrive policy, encrypted and TLS-only."""

from __future__ import annotations

from aws_cdk import Duration
from aws_cdk import aws_sqs as sqs

from constructs import Construct


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
    ) -> None:
        super().__init__(scope, id)
        self.dlq = sqs.Queue(
            self,
            "Dlq",
            queue_name=f"{queue_name}-dlq",
            retention_period=Duration.days(dlq_retention_days),
            encryption=sqs.QueueEncryption.SQS_MANAGED,
            enforce_ssl=True,
        )
        self.queue = sqs.Queue(
            self,
            "Queue",
            queue_name=queue_name,
            visibility_timeout=Duration.seconds(visibility_timeout_s),
            retention_period=Duration.days(4),
            encryption=sqs.QueueEncryption.SQS_MANAGED,
            enforce_ssl=True,
            dead_letter_queue=sqs.DeadLetterQueue(
                queue=self.dlq, max_receive_count=max_receive_count
            ),
        )
