"""One fact builder for the behavioural-memory tests of every tier."""

from __future__ import annotations

from typing import Any

from engram.behaviour.models import Fact, FactCategory


def make_fact(
    subject: str,
    *,
    confidence: float = 0.5,
    count: int = 1,
    at: int = 0,
    identity: str = "t:u",
    content: str = "x",
    **fields: Any,
) -> Fact:
    """A stored fact as a round would make it: id and category from the subject
    (``"tool_affinity:x"``), reinforced, created and updated ``at``; ``fields`` set any other
    field (or override those)."""
    values: dict[str, Any] = {
        "id": f"fact:{subject}",
        "identity_id": identity,
        "category": FactCategory(subject.split(":", 1)[0]),
        "subject": subject,
        "content": content,
        "confidence": confidence,
        "reinforcement_count": count,
        "last_reinforced_at": at,
        "created_at": at,
        "updated_at": at,
    }
    return Fact(**{**values, **fields})
