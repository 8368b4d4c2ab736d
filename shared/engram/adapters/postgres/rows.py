"""Rows of ``memories`` as domain objects: the selected columns and their decoding."""

from __future__ import annotations

import uuid
from collections.abc import Sequence
from datetime import UTC
from typing import Any

from engram.memories.models import Memory, ReviewAction, Scope, Status

COLUMNS = (
    "m.id, m.team_id, m.scope, m.owner_id, m.user_id, m.key, m.value, m.source_channel_id, "
    "m.confidence, m.status, m.created_at, m.updated_at, m.source_user_id, m.version"
)
#: Without a query: confidence, then newest first (``recall.unranked_key``).
ORDER_UNRANKED = "m.confidence DESC, m.updated_at DESC, m.id"
#: Ties of a score: confidence, then key in code-point order, then id (``recall.tie_key``).
ORDER_TIES = 'm.confidence DESC, m.key COLLATE "C", m.id'


def as_uuid(memory_id: str) -> uuid.UUID | None:
    try:
        return uuid.UUID(memory_id)
    except (ValueError, AttributeError, TypeError):
        return None


def vector_literal(values: Sequence[float] | None) -> str | None:
    if values is None:
        return None
    return "[" + ",".join(repr(float(v)) for v in values) + "]"


def memory_from_row(row: dict[str, Any]) -> Memory:
    return Memory(
        id=str(row["id"]),
        team_id=row["team_id"],
        scope=Scope(row["scope"]),
        owner_id=row["owner_id"],
        user_id=row["user_id"],
        key=row["key"],
        value=row["value"],
        source_channel_id=row["source_channel_id"],
        confidence=float(row["confidence"]),
        status=Status(row["status"]),
        created_at=row["created_at"].astimezone(UTC),
        updated_at=row["updated_at"].astimezone(UTC),
        source_user_id=row["source_user_id"],
        version=int(row["version"]),
    )


def action_from_row(row: dict[str, Any]) -> ReviewAction:
    """A ``review_actions`` row: its columns are the model's fields, its ids UUIDs."""
    return ReviewAction.model_validate(
        {**row, "id": str(row["id"]), "memory_id": str(row["memory_id"])}
    )
