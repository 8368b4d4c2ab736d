"""Small helpers that turn stage-config values into CDK values, and security-group rules."""

from __future__ import annotations

from typing import Any

from aws_cdk import Aws, Fn, RemovalPolicy
from aws_cdk import aws_ec2 as ec2
from aws_cdk import aws_logs as logs

from constructs import Construct

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


def removal_policy(retain: bool) -> RemovalPolicy:
    """What happens to a resource when its stack (or the resource) is deleted.

    Retained resources are kept on update and delete but not when the create that made them
    rolls back (CloudFormation ``RetainExceptOnCreate``), so a failed first deploy leaves
    nothing behind. Whatever is retained has a generated name (see :func:`stack_unique`), so a
    later deploy of the same stage never collides with what an earlier one kept.
    """
    return RemovalPolicy.RETAIN_ON_UPDATE_OR_DELETE if retain else RemovalPolicy.DESTROY


def stack_unique(prefix: str) -> str:
    """``<prefix>-<8 hex digits>`` unique to this instance of the stack (from its stack id).

    For the resources CloudFormation cannot name itself (ElastiCache caches, users and user
    groups need an explicit id): a stack created again after a failed create or a delete gets
    new names, so resources kept from the old one never block it."""
    stack_uuid = Fn.select(2, Fn.split("/", Aws.STACK_ID))
    return f"{prefix}-{Fn.select(0, Fn.split('-', stack_uuid))}"


def allow_tcp(
    scope: Construct,
    id: str,
    *,
    source: ec2.ISecurityGroup,
    target: ec2.ISecurityGroup,
    ports: tuple[int, int],
) -> None:
    """Ingress on ``target`` from ``source`` and the matching egress on ``source`` for the tcp
    port range ``ports``, both kept in ``scope``'s stack (so cross-stack groups make no cycle)."""
    from_port, to_port = ports
    rule: dict[str, Any] = {
        "ip_protocol": "tcp",
        "from_port": from_port,
        "to_port": to_port,
        "description": f"{id}: tcp {from_port}-{to_port}",
    }
    ec2.CfnSecurityGroupIngress(
        scope,
        f"{id}In",
        group_id=target.security_group_id,
        source_security_group_id=source.security_group_id,
        **rule,
    )
    ec2.CfnSecurityGroupEgress(
        scope,
        f"{id}Out",
        group_id=source.security_group_id,
        destination_security_group_id=target.security_group_id,
        **rule,
    )
