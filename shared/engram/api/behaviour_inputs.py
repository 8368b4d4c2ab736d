"""What a client sends to behavioural memory: observations, raw events and tool candidates
(one model each), each mapped to its domain command (``engram.behaviour.commands``) by its
``command()``, here and nowhere else.

``POST /v1/observations`` validates ``ObservationsRequest``, ``POST /v1/events``
``EventsRequest``; the ingest use case and server-side emission take their commands.
An observation's ``metadata`` follows the rule of its ``type`` (``engram.behaviour.models
.METADATA``); the JSON Schema states that rule per type.
"""

from __future__ import annotations

from contextvars import ContextVar
from typing import Annotated, Any, Literal, Self, cast

from pydantic import (
    ConfigDict,
    Field,
    JsonValue,
    ModelWrapValidatorHandler,
    PlainValidator,
    TypeAdapter,
    ValidationError,
    ValidationInfo,
    field_validator,
    model_validator,
)
from pydantic_core import PydanticCustomError

from engram import limits
from engram.behaviour.commands import (
    ObservationItem,
    QueryAsked,
    RankTools,
    RecordEvents,
    RecordObservations,
    ToolRan,
)
from engram.behaviour.models import (
    METADATA,
    ObservationType,
    validate_metadata,
    validate_metadata_many,
)
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


def _object(value: Any) -> dict[str, Any]:
    """A JSON object as it arrives: a ``dict`` with string keys. What it holds is checked as
    JSON (every value encodable, sizes, the text rule) by the metadata rule of its type
    (``validate_metadata`` for one observation, ``validate_metadata_many`` for a request), not
    a second time here, value by value, by a ``JsonValue`` validator."""
    if type(value) is not dict:
        raise PydanticCustomError("dict_type", "Input should be a valid dictionary")
    if not set(map(type, value)) <= {str}:
        raise PydanticCustomError("dict_type", "Input should be a dictionary with string keys")
    return value


#: an observation's metadata: an object of JSON values, documented as such
_MetadataObject = Annotated[
    dict[str, Any], PlainValidator(_object, json_schema_input_type=dict[str, JsonValue])
]


class ObservationIn(InputModel):
    """One typed observation. ``id`` makes a retry idempotent; ``createdAt`` is client time."""

    model_config = ConfigDict(json_schema_extra=_observation_schema)

    type: ObservationTypeName
    content: Content
    metadata: _MetadataObject = Field(default_factory=dict, validate_default=True)
    id: Identifier | None = None
    created_at: EpochMs | None = None

    @field_validator("metadata")
    @classmethod
    def _metadata_of_type(cls, value: dict[str, Any], info: ValidationInfo) -> dict[str, Any]:
        obs_type = info.data.get("type")
        if obs_type is None or _LIST_CHECKS_METADATA.get():
            return value  # the type's own error names it; or the list checks them all
        return validate_metadata(ObservationType(obs_type), value)

    def item(self) -> ObservationItem:
        """``model_dump(by_alias=True, exclude_none=True)`` without the serializer's pass: every
        validated value is a JSON value already (the metadata's dict is the model's own)."""
        values = self.__dict__
        item = {alias: values[name] for name, alias in _ITEM_KEYS if values[name] is not None}
        return cast("ObservationItem", item)  # its keys and values, by construction


#: each field of ``ObservationIn`` and its JSON name, in the model's order (as a dump has them)
_ITEM_KEYS = tuple((name, f.alias or name) for name, f in ObservationIn.model_fields.items())
_TYPES = {t.value: t for t in ObservationType}
#: True while ``ObservationsRequest`` validates its observations: their metadata is then
#: checked once for the whole list (``validate_metadata_many``), not observation by observation.
_LIST_CHECKS_METADATA: ContextVar[bool] = ContextVar("engram_list_checks_metadata", default=False)


# Each observation's metadata follows the rule of its type, as ``ObservationIn`` checks it
# alone; a request checks the rule once over its whole list, and a request that breaks any rule
# is validated again observation by observation, so its errors are exactly those of
# ``ObservationIn`` (every one, each naming its field). (A comment: a docstring would be the
# OpenAPI description.)
class ObservationsRequest(InputModel):
    observations: list[ObservationIn] = Field(min_length=1, max_length=limits.MAX_BATCH_ITEMS)

    @model_validator(mode="wrap")
    @classmethod
    def _metadata_at_once(cls, data: Any, handler: ModelWrapValidatorHandler[Self]) -> Self:
        token = _LIST_CHECKS_METADATA.set(True)
        try:
            request = handler(data)
        except ValidationError:
            request = None
        finally:
            _LIST_CHECKS_METADATA.reset(token)
        if request is not None:
            observations = request.observations
            checked = validate_metadata_many([(_TYPES[o.type], o.metadata) for o in observations])
            if checked is not None:
                for observation, metadata in zip(observations, checked, strict=True):
                    # the validated value (names trimmed) on the model being built
                    observation.__dict__["metadata"] = metadata
                return request
        return handler(data)  # observation by observation: every error, naming its field

    def command(self) -> RecordObservations:
        return RecordObservations(
            items=tuple(observation.item() for observation in self.observations)
        )


def _kind_required(schema: dict[str, Any]) -> None:
    # the union picks a model by ``kind``: JSON must send it (Python may leave it out)
    schema["required"] = ["kind", *[r for r in schema.get("required", []) if r != "kind"]]


class QueryEvent(InputModel):
    model_config = ConfigDict(json_schema_extra=_kind_required)

    kind: Literal["query"] = "query"
    text: Content

    def event(self) -> QueryAsked:
        return QueryAsked(text=self.text)


class ToolEvent(InputModel):
    model_config = ConfigDict(json_schema_extra=_kind_required)

    kind: Literal["tool"] = "tool"
    tool_name: Name
    ok: bool
    duration_ms: Annotated[int, Field(ge=0, le=limits.MAX_DURATION_MS), WHOLE]
    error: ErrorText | None = None
    result: ToolResultJson = None

    def event(self) -> ToolRan:
        return ToolRan(
            tool_name=self.tool_name,
            ok=self.ok,
            duration_ms=self.duration_ms,
            error=self.error,
            result=self.result,
        )


Event = Annotated[QueryEvent | ToolEvent, Field(discriminator="kind")]


class EventsRequest(InputModel):
    events: list[Event] = Field(min_length=1, max_length=limits.MAX_BATCH_ITEMS)

    def command(self) -> RecordEvents:
        return RecordEvents(events=tuple(event.event() for event in self.events))


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

    def command(self) -> RankTools:
        return RankTools(candidates=tuple((c.name, c.score) for c in self.candidates))


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
