"""cdk-nag (v3) wiring: the AwsSolutions pack as a CDK validation plugin, and acknowledgments.

Every acknowledgment goes through :func:`acknowledge`, which insists on a written reason.
"""

from __future__ import annotations

from aws_cdk import Acknowledgment, App, Validations
from cdk_nag import AwsSolutionsChecks

from constructs import IConstruct

MIN_REASON_WORDS = 6


def enable_aws_solutions(app: App) -> None:
    """Run the AwsSolutions rules on synthesis; any unacknowledged finding fails the synth."""
    Validations.of(app).add_plugins(AwsSolutionsChecks(app))


def acknowledge(scope: IConstruct, rule: str, reason: str) -> None:
    """Acknowledge one cdk-nag finding (``AwsSolutions-XX`` or ``AwsSolutions-XX[finding]``)."""
    if len(reason.split()) < MIN_REASON_WORDS:
        raise ValueError(f"acknowledgment of {rule}: the reason must explain why ({reason!r})")
    Validations.of(scope).acknowledge(Acknowledgment(id=rule, reason=reason))
