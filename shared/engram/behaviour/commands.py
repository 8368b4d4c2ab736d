"""What a caller asks of behavioural memory, one frozen command per request.

The edge (``engram.api``) validates a request and maps it to one of these, once; ingest and
emission take them as they are. They carry the validated items as plain values (no model
per item), so the hot ingest path builds nothing it does not send.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any, TypedDict

from pydantic import JsonValue

__all__ = [
    "ObservationItem",
    "QueryAsked",
    "RankTools",
    "RecordEvents",
    "RecordObservations",
    "ToolRan",
]


#: An observation as a client sent it, validated, in the shape the ingest queue's message
#: carries it (``engram.use_cases.ingest_messages``): ``type``, ``content``, ``metadata`` and,
#: when given, ``id`` and ``createdAt``.
class ObservationItem(TypedDict, total=False):
    type: str
    content: str
    metadata: dict[str, Any]
    id: str
    createdAt: int


@dataclass(frozen=True, slots=True)
class RecordObservations:
    """Queue typed observations of the caller (ingest completes copies of the items with an
    id and the arrival time where they have none)."""

    items: tuple[ObservationItem, ...]


@dataclass(frozen=True, slots=True)
class QueryAsked:
    """A raw event: the user asked ``text``."""

    text: str


@dataclass(frozen=True, slots=True)
class ToolRan:
    """A raw event: a tool ran, succeeded (``ok``) or failed with ``error``; ``result`` is
    what it returned (JSON)."""

    tool_name: str
    ok: bool
    duration_ms: int
    error: str | None = None
    result: JsonValue = None


@dataclass(frozen=True, slots=True)
class RecordEvents:
    """Queue the observations raw events give (server-side emission)."""

    events: tuple[QueryAsked | ToolRan, ...]


@dataclass(frozen=True, slots=True)
class RankTools:
    """Order the caller's ``(name, score)`` candidates (each name once) by score plus the
    affinity the caller's facts give each tool."""

    candidates: tuple[tuple[str, float], ...]
