"""What a client sends to behavioural memory: observations and raw events (one model each).

``POST /v1/observations`` validates ``ObservationsRequest``, ``POST /v1/events``
``EventsRequest``; the ingest use case and server-side emission take these validated models.
An observation's ``metadata`` follows the rule of its ``type`` (``engram.behaviour.models
.METADATA``); the JSON Schema states that rule per type.
"""

from __future__ import annotations

from typing import Annotated, Any, Literal

from pydantic import (
    ConfigDict,
    Field,
    JsonValue,
    TypeAdapter,
    ValidationInfo,
    field_validator,
    model_validator,
)

from engram import limits
from engram.behaviour.models import METADATA, ObservationType, validate_metadata
from engram.fields import (
    JSON_VALUE_MARKER,
    TEXT_PATTERN,
    WHOLE,
    Content,
    EpochMs,
    ErrorText,
    Identifier,
    InputModel,
    Name,
    ToolResultJson,
    field_error,
)

ObservationTypeName = Literal["tool_success", "tool_failure", "entity_access", "query_pattern"]


def _metadata_schema(obs_type: ObservationType) -> dict[str, Any]:
    schema = TypeAdapter(METADATA[obs_type]).json_schema(by_alias=True)
    schema.pop("title", None)
    schema["additionalProperties"] = dict(JSON_VALUE_MARKER)
    schema["propertyNames"] = {"pattern": TEXT_PATTERN}
    schema["description"] = f"At most {limits.MAX_METADATA_BYTES} bytes as compact UTF-8 JSON."
    return schema


def _observation_schema(schema: dict[str, Any]) -> None:
    """Per type: the metadata keys it requires (what the server enforces)."""
    schema["oneOf"] = [
        {
            "properties": {"type": {"const": t.value}, "metadata": _metadata_schema(t)},
            "required": ["type", "metadata"],
        }
        for t in ObservationType
    ]


class ObservationIn(InputModel):
    """One typed observation. ``id`` makes a retry idempotent; ``createdAt`` is client time."""

    model_config = ConfigDict(json_schema_extra=_observation_schema)

    type: ObservationTypeName
    content: Content
    metadata: dict[str, JsonValue] = Field(default_factory=dict, validate_default=True)
    id: Identifier | None = None
    created_at: EpochMs | None = None

    @field_validator("metadata")
    @classmethod
    def _metadata_of_type(cls, value: dict[str, Any], info: ValidationInfo) -> dict[str, Any]:
        obs_type = info.data.get("type")
        if obs_type is None:
            return value  # the type's own error names it
        return validate_metadata(ObservationType(obs_type), value)


class ObservationsRequest(InputModel):
    observations: list[ObservationIn] = Field(min_length=1, max_length=limits.MAX_BATCH_ITEMS)


def _kind_required(schema: dict[str, Any]) -> None:
    # the union picks a model by ``kind``: JSON must send it (Python may leave it out)
    schema["required"] = ["kind", *[r for r in schema.get("required", []) if r != "kind"]]


class QueryEvent(InputModel):
    model_config = ConfigDict(json_schema_extra=_kind_required)

    kind: Literal["query"] = "query"
    text: Content


class ToolEvent(InputModel):
    model_config = ConfigDict(json_schema_extra=_kind_required)

    kind: Literal["tool"] = "tool"
    tool_name: Name
    ok: bool
    duration_ms: Annotated[int, Field(ge=0, le=limits.MAX_DURATION_MS), WHOLE]
    error: ErrorText | None = None
    result: ToolResultJson = None


Event = Annotated[QueryEvent | ToolEvent, Field(discriminator="kind")]


class EventsRequest(InputModel):
    events: list[Event] = Field(min_length=1, max_length=limits.MAX_BATCH_ITEMS)


class ToolCandidate(InputModel):
    """A tool of the caller's catalogue and its relevance ``score`` (any finite number on the
    caller's own scale, as its catalogue search scores matches)."""

    name: Name
    score: Annotated[float, Field(allow_inf_nan=False)]


class ToolRankRequest(InputModel):
    """``POST /v1/tools/rank``: the candidates to order, each tool once."""

    candidates: list[ToolCandidate] = Field(min_length=1, max_length=limits.MAX_RANK_CANDIDATES)

    @model_validator(mode="after")
    def _each_tool_once(self) -> ToolRankRequest:
        seen: set[str] = set()
        for i, candidate in enumerate(self.candidates):
            if candidate.name in seen:
                raise field_error(
                    "ToolRankRequest",
                    f"candidates.{i}.name",
                    "value_error",
                    "names a tool already given; give each tool once",
                )
            seen.add(candidate.name)
        return self


__all__ = [
    "Event",
    "EventsRequest",
    "ObservationIn",
    "ObservationTypeName",
    "ObservationsRequest",
    "QueryEvent",
    "ToolCandidate",
    "ToolEvent",
    "ToolRankRequest",
]
