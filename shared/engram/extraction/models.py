"""Extraction models: the queued transcript, what extractors propose (pydantic v2, camelCase)."""

from __future__ import annotations

import uuid
from collections.abc import Mapping, Sequence
from enum import StrEnum
from typing import Literal

from pydantic import BaseModel, ConfigDict, Field, field_validator
from pydantic.alias_generators import to_camel

from engram import limits
from engram.extraction.sanitize import normalise_key, sanitise_value
from engram.fields import EpochMs, Identifier, MessageText

MAX_MESSAGE_CHARS = limits.MAX_MESSAGE_CHARS
MAX_MESSAGES = limits.MAX_TRANSCRIPT_MESSAGES

#: ``tool`` messages are accepted and queued; extractors learn nothing from them (a tool's
#: output is not something the user said).
Role = Literal["user", "assistant", "system", "tool"]


class ProposalScope(StrEnum):
    USER = "user"
    PERSONA = "persona"
    PERSONA_USER = "persona_user"


class _Model(BaseModel):
    model_config = ConfigDict(
        alias_generator=to_camel, populate_by_name=True, frozen=True, extra="forbid"
    )


class ConversationMessage(_Model):
    """One message of a queued transcript (``TranscriptJob.messages``), as the extractors
    read it; strict, as the request that queued it was (``"5"`` is no time)."""

    model_config = ConfigDict(
        alias_generator=to_camel, populate_by_name=True, frozen=True, extra="forbid", strict=True
    )

    role: Role
    content: MessageText
    at: EpochMs | None = None


class TranscriptJob(_Model):
    """One queued transcript: the extraction queue's message body (JSON, camelCase).

    Unknown fields are ignored here (unlike the HTTP request models) so that a newer producer
    never sends a message an older consumer can only dead-letter.
    """

    model_config = ConfigDict(
        alias_generator=to_camel, populate_by_name=True, frozen=True, extra="ignore"
    )

    job_id: Identifier
    conversation_id: Identifier
    team_id: Identifier
    user_id: Identifier
    persona_id: Identifier | None = None
    messages: list[ConversationMessage] = Field(min_length=1, max_length=MAX_MESSAGES)
    queued_at: EpochMs

    @classmethod
    def new(
        cls,
        *,
        conversation_id: str,
        team_id: str,
        user_id: str,
        messages: Sequence[ConversationMessage | Mapping[str, object]],
        queued_at: int,
        persona_id: str | None = None,
        job_id: str | None = None,
    ) -> TranscriptJob:
        """A job as the transcript route enqueues it (a fresh uuid4 ``jobId`` unless given).
        Raises pydantic ValidationError naming the field for bad input."""
        return cls.model_validate(
            {
                "jobId": job_id or str(uuid.uuid4()),
                "conversationId": conversation_id,
                "teamId": team_id,
                "userId": user_id,
                "personaId": persona_id,
                "messages": [
                    m.model_dump(by_alias=True) if isinstance(m, ConversationMessage) else dict(m)
                    for m in messages
                ],
                "queuedAt": queued_at,
            }
        )

    def to_json(self) -> str:
        """The queue message body (camelCase JSON)."""
        return self.model_dump_json(by_alias=True, exclude_none=True)


class Proposal(_Model):
    """A proposed memory. ``key`` is normalised and ``value`` sanitised on construction."""

    key: str = Field(min_length=1, max_length=limits.MAX_KEY_CHARS)
    value: str = Field(min_length=1, max_length=limits.MAX_VALUE_CHARS)
    confidence: float = Field(ge=0.0, le=1.0, allow_inf_nan=False)
    scope: ProposalScope
    source_channel_id: Identifier

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
