"""Small helpers that turn stage-config values into CDK values."""

from __future__ import annotations

from aws_cdk import RemovalPolicy
from aws_cdk import aws_logs as logs

_RETENTION: tuple[tuple[int, logs.RetentionDays], ...] = (
    (1, logs.RetentionDays.ONE_DAY),
    (3, logs.RetentionDays.THREE_DAYS),
    (5, logs.RetentionDays.FIVE_DAYS),
    (7, logs.RetentionDays.ONE_WEEK),
    (14, logs.RetentionDays.TWO_WEEKS),
    (30, logs.RetentionDays.ONE_MONTH),
    (60, logs.RetentionDays.TWO_MONTHS),
    (90, logs.RetentionDays.THREE_MONTHS),
    (120, logs.RetentionDays.FOUR_MONTHS),
    (150, logs.RetentionDays.FIVE_MONTHS),
    (180, logs.RetentionDays.SIX_MONTHS),
    (365, logs.RetentionDays.ONE_YEAR),
    (400, logs.RetentionDays.THIRTEEN_MONTHS),
    (545, logs.RetentionDays.EIGHTEEN_MONTHS),
    (731, logs.RetentionDays.TWO_YEARS),
    (1096, logs.RetentionDays.THREE_YEARS),
    (1827, logs.RetentionDays.FIVE_YEARS),
    (3653, logs.RetentionDays.TEN_YEARS),
)


def log_retention(days: int) -> logs.RetentionDays:
    """The shortest CloudWatch Logs retention that keeps logs for at least ``days``."""
    for allowed, value in _RETENTION:
        if allowed >= days:
            return value
    return _RETENTION[-1][1]


def data_removal_policy(retain: bool) -> RemovalPolicy:
    """RETAIN for stages that keep their data on stack deletion, DESTROY otherwise."""
    return RemovalPolicy.RETAIN if retain else RemovalPolicy.DESTROY
