"""Amazon Bedrock model ids, cross-region inference profile ids, and what invoking one needs.

Claude models on Bedrock are invoked through system-defined cross-region inference profiles in
most regions: the id of the model with a geography in front (``us.``, ``eu.``, ``apac.``, …,
``global.``), e.g. ``us.anthropic.claude-3-5-haiku-20241022-v1:0``. The profile routes each
request to the foundation model in one of the regions of its geography. Both the Converse and
the InvokeModel API take either id as ``modelId``, so ``ENGRAM_BEDROCK_*_MODEL_ID`` may hold
either. Invoking through a profile needs ``bedrock:InvokeModel`` on the profile and on the
foundation model in every region it routes to; ``invoke_grants`` names both, the second only
through that profile (``bedrock:InferenceProfileArn``), so the role can call the model in no
other way. Pure string work: the settings validate with it and the template derives its IAM
statements from it.
"""

from __future__ import annotations

import re
from dataclasses import dataclass

GEOGRAPHIES = ("us", "us-gov", "eu", "apac", "jp", "au", "ca", "global")
"""Prefixes of the system-defined cross-region inference profiles."""

_GEOGRAPHY = "|".join(map(re.escape, GEOGRAPHIES))
_MODEL = rf"(?!(?:{_GEOGRAPHY})\.)[a-z0-9-]+\.[A-Za-z0-9][A-Za-z0-9._:-]*"  # provider.model
_ID = re.compile(rf"^(?:(?P<geography>{_GEOGRAPHY})\.)?(?P<model>{_MODEL})$")

ACTIONS = ("bedrock:InvokeModel",)
"""What Converse and InvokeModel need (Converse is authorised as ``bedrock:InvokeModel``)."""


@dataclass(frozen=True)
class BedrockModel:
    """A ``modelId`` as configured: a foundation model, or an inference profile of one."""

    id: str
    geography: str | None
    foundation_model: str

    @property
    def is_profile(self) -> bool:
        return self.geography is not None


@dataclass(frozen=True)
class Grant:
    """One IAM statement's worth: ``ACTIONS`` on ``resources``, under ``condition``."""

    resources: tuple[str, ...]
    condition: dict[str, dict[str, str]] | None = None


def parse_model_id(value: str) -> BedrockModel:
    """``value`` as a model or profile id; ``ValueError`` naming what is wrong otherwise."""
    match = _ID.match(value)
    if match is None:
        raise ValueError(
            f"{value!r} is not a Bedrock model id (provider.model) or inference profile id "
            f"({'|'.join(GEOGRAPHIES)}.provider.model)"
        )
    return BedrockModel(value, match["geography"], match["model"])


def invoke_grants(model_id: str, *, partition: str, region: str, account: str) -> list[Grant]:
    """The grants invoking ``model_id`` from ``region`` needs: the foundation model there; or
    the inference profile and, through that profile only, its foundation model in whichever
    region the profile routes to."""
    model = parse_model_id(model_id)
    if not model.is_profile:
        return [Grant((f"arn:{partition}:bedrock:{region}::foundation-model/{model.id}",))]
    profile = f"arn:{partition}:bedrock:{region}:{account}:inference-profile/{model.id}"
    routed = f"arn:{partition}:bedrock:*::foundation-model/{model.foundation_model}"
    through_profile = {"StringEquals": {"bedrock:InferenceProfileArn": profile}}
    return [Grant((profile,)), Grant((routed,), through_profile)]
