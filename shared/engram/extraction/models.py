"""Extraction models: what the API enqueues, what extractors propose (pydantic v2, camelCase)."""

from __future__ import annotations

from enum import StrEnum
from typing import Annotated, Literal

from pydantic import BaseModel, ConfigDict, Field, field_validator
from pydantic.alias_generators import to_camel

from engram.extraction.sanitize import (
    MAX_KEY_CHARS,
    MAX_VALUE_CHARS,
    normalise_key,
    sanitise_value,
)

MAX_MESSAGE_CHARS = 8000
MAX_MESSAGES = 500

Role = Literal["user", "assistant", "system"]


class ProposalScope(StrEnum):
    USER = "user"
    PERSONA = "persona"
    PERSONA_USER = "persona_user"


class _Model(BaseModel):
    model_config = ConfigDict(
        alias_generator=to_camel, populate_by_name=True, frozen=True, extra="forbid"
    )


EpochMs = Annotated[int, Field(ge=0, le=253_402_300_799_999)]
Id = Annotated[str, Field(min_length=1, max_length=256)]


class TranscriptMessage(_Model):
    role: Role
    content: str = Field(min_length=1, max_length=MAX_MESSAGE_CHARS)
    at: EpochMs | None = None


class TranscriptJob(_Model):
    """One queued transcript: the extraction queue's message body (JSON, camelCase).

    Unknown fields are ignored here (unlike the HTTP request models) so that a newer producer
    never sends a message an older consumer can only dead-letter.
    """

    model_config = ConfigDict(
        alias_generator=to_camel, populate_by_name=True, frozen=True, extra="ignore"
    )

    job_id: Id
    conversation_id: Id
    team_id: Id
    user_id: Id
    persona_id: Id | None = None
    messages: list[TranscriptMessage] = Field(min_length=1, max_length=MAX_MESSAGES)
    queued_at: EpochMs

    def to_json(self) -> str:
        return self.model_dump_json(by_alias=True, exclude_none=True)


class Proposal(_Model):
    """A proposed memory. ``key`` is normalised and ``value`` sanitised on construction."""

    key: str = Field(min_length=1, max_length=MAX_KEY_CHARS)
    value: str = Field(min_length=1, max_length=MAX_VALUE_CHARS)
    confidence: float = Field(ge=0.0, le=1.0, allow_inf_nan=False)
    scope: ProposalScope
    source_channel_id: Id

    @field_validator("key", mode="before")
    @classmethod
    def _normalise_key(cls, v: object) -> object:
        return normalise_key(v) if isinstance(v, str) else v

    @field_validator("value", mode="before")
    @classmethod
    def _sanitise_value(cls, v: object) -> object:
        return sanitise_value(v) if isinstance(v, str) else v


class Usage(_Model):
    input_tokens: int = Field(ge=0)
    output_tokens: int = Field(ge=0)


class ExtractionResult(_Model):
    proposals: list[Proposal] = Field(default_factory=list)
    usage: Usage | None = None
    extractor: str = Field(min_length=1)
