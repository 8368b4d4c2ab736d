"""What a caller asks of extraction: one frozen command per request (the edge maps its input to
it once; the use case takes it as it is)."""

from __future__ import annotations

from dataclasses import dataclass

from engram.extraction.models import ConversationMessage


@dataclass(frozen=True, slots=True)
class QueueTranscript:
    """Queue one conversation's messages for extraction, for the caller and ``persona_id``."""

    conversation_id: str
    messages: tuple[ConversationMessage, ...]
    persona_id: str | None = None
