"""What a client sends to extraction: the body of ``POST
/v1/conversations/{conversationId}/transcript``, mapped to its command at the edge."""

from __future__ import annotations

from pydantic import Field

from engram import limits
from engram.extraction.commands import QueueTranscript
from engram.extraction.models import ConversationMessage, Role
from engram.fields import EpochMs, Identifier, InputModel, MessageText


class TranscriptMessage(InputModel):
    """One message of a transcript: what ``POST /v1/conversations/{id}/transcript`` takes,
    and what the extraction job carries."""

    role: Role
    content: MessageText
    at: EpochMs | None = None


class TranscriptRequest(InputModel):
    """The body of ``POST /v1/conversations/{conversationId}/transcript``."""

    persona_id: Identifier | None = None
    messages: list[TranscriptMessage] = Field(
        min_length=1, max_length=limits.MAX_TRANSCRIPT_MESSAGES
    )

    def command(self, conversation_id: str) -> QueueTranscript:
        messages = tuple(
            ConversationMessage(role=m.role, content=m.content, at=m.at) for m in self.messages
        )
        return QueueTranscript(conversation_id, messages, self.persona_id)
