"""The domain events Engram publishes, one pydantic model per event type and schema version.

An event carries ids, a sequence number and metadata only, never a memory's key or value, so
the event stream is never a second copy of what users told the assistant. Every model forbids
extra fields; its JSON schema (``json_schemas``) has ``additionalProperties: false`` and is the
one documented in ``docs/events.md``.

``sequence`` numbers the events of one aggregate (a memory, a user, a team's settings) from 1
without gaps, in the order the changes committed: a consumer keeps the highest sequence it
applied per aggregate and ignores an event at or below it (a duplicate or a late delivery).
``eventId`` is stable across re-sends of the same event (EventBridge gives every put its own
id), so it is the key to deduplicate on.
"""

from __future__ import annotations

from datetime import datetime
from typing import Any, Literal, get_args

from pydantic import BaseModel, ConfigDict, Field
from pydantic.alias_generators import to_camel

from engram import limits

#: ``source`` of every event Engram puts on a bus.
SOURCE = "engram"

MemoryEventType = Literal[
    "memory.saved",
    "memory.updated",
    "memory.deleted",
    "memory.proposed",
    "memory.approved",
    "memory.rejected",
    "memory.restored",
    "memory.merged",
]
EventType = Literal[MemoryEventType, "user.erased", "team.settings.changed"]

#: what caused a memory event: a person through the API, an admin's review decision, the
#: extraction job proposing it, or the service's other jobs (retention, the erasure backstop)
Cause = Literal["api", "review", "extraction", "service"]
#: ``actorId`` of the changes the service makes on its own (extraction, retention, backstop)
SERVICE_ACTOR = "engram-system"

_Id = Field(min_length=1, max_length=limits.MAX_ID_CHARS)


class _Event(BaseModel):
    model_config = ConfigDict(
        alias_generator=to_camel, populate_by_name=True, frozen=True, extra="forbid"
    )

    event_id: str = Field(description="stable id of this event: the same on every re-send")
    schema_version: int = Field(description="version of this event type's schema")
    occurred_at: datetime = Field(description="when the change was made (UTC)")
    team_id: str = _Id
    sequence: int = Field(ge=1, description="1, 2, 3 … per aggregate, in commit order")

    def to_detail(self) -> dict[str, Any]:
        """The event as the JSON object a bus carries (EventBridge ``detail``)."""
        return self.model_dump(mode="json", by_alias=True)


class _MemoryChange(_Event):
    """One change of one memory. ``sequence`` counts the memory's events."""

    type: MemoryEventType
    memory_id: str = _Id
    scope: Literal["user", "persona", "persona_user"]
    owner_id: str = Field(
        min_length=1,
        max_length=limits.MAX_ID_CHARS,
        description="the user (user scope) or the persona (persona scopes)",
    )
    user_id: str | None = Field(
        max_length=limits.MAX_ID_CHARS, description="the persona_user's user, else null"
    )
    status: Literal["active", "pending_review", "archived", "rejected"] | None = Field(
        description="the memory's status after the change (null when deleted)"
    )
    actor_id: str = Field(
        min_length=1,
        max_length=limits.MAX_ID_CHARS,
        description="who made the change: a user, or the service ('engram-system')",
    )
    cause: Cause


class MemoryEvent(_MemoryChange):
    """One change of one memory. ``sequence`` counts the memory's events."""

    schema_version: Literal[1] = Field(description="version of this event type's schema")


class MemoryUpdated(_MemoryChange):
    """``memory.updated`` version 2: also the memory's version after the change (its
    ``ETag``, and the number of the version its history recorded)."""

    type: Literal["memory.updated"]
    schema_version: Literal[2] = Field(description="version of this event type's schema")
    version: int = Field(ge=1, description="the memory's version after the change")


class MemoryMerged(_MemoryChange):
    """``memory.merged``: a person folded the memory ``memoryId`` into ``intoId`` (same owner
    and scope): its versions are now ``intoId``'s earliest, and it is gone (``status`` null).
    Ids only."""

    type: Literal["memory.merged"]
    schema_version: Literal[1] = Field(description="version of this event type's schema")
    into_id: str = Field(min_length=1, max_length=limits.MAX_ID_CHARS)


class UserErased(_Event):
    """``DELETE /v1/me``: everything held about the user is being erased. ``sequence``
    counts the user's erasures."""

    type: Literal["user.erased"]
    schema_version: Literal[1] = Field(description="version of this event type's schema")
    user_id: str = _Id
    erased_at: datetime


class RetentionSettings(BaseModel):
    model_config = ConfigDict(
        alias_generator=to_camel, populate_by_name=True, frozen=True, extra="forbid"
    )

    archive_after_days: int | None = Field(ge=1)
    delete_archived_after_days: int | None = Field(ge=1)


class TeamSettingsChanged(_Event):
    """A team admin changed the team's settings. ``sequence`` counts the team's changes."""

    type: Literal["team.settings.changed"]
    schema_version: Literal[1] = Field(description="version of this event type's schema")
    actor_id: str = _Id
    memory_enabled: bool
    retention: RetentionSettings


DomainEvent = MemoryEvent | MemoryUpdated | MemoryMerged | UserErased | TeamSettingsChanged

#: the model of each event type
MEMORY_EVENT_TYPES: tuple[MemoryEventType, ...] = get_args(MemoryEventType)
MODELS: dict[str, type[_Event]] = {
    **dict.fromkeys(MEMORY_EVENT_TYPES, MemoryEvent),
    "memory.updated": MemoryUpdated,
    "memory.merged": MemoryMerged,
    "user.erased": UserErased,
    "team.settings.changed": TeamSettingsChanged,
}
EVENT_TYPES: tuple[str, ...] = tuple(MODELS)


def schema_version(event_type: str) -> int:
    """The schema version ``event_type``'s events are published in."""
    annotation = MODELS[event_type].model_fields["schema_version"].annotation
    (version,) = get_args(annotation)
    return int(version)


def json_schema(event_type: str) -> dict[str, Any]:
    """The JSON schema of ``event_type``'s ``detail`` (its ``schema_version``): the model's
    schema with ``type`` fixed to this event type."""
    schema: dict[str, Any] = _untitled(
        MODELS[event_type].model_json_schema(by_alias=True, mode="serialization")
    )
    schema["title"] = f"{event_type} v{schema_version(event_type)}"
    schema["properties"]["type"] = {"const": event_type, "type": "string"}
    return schema


def _untitled(node: Any) -> Any:
    """The schema without pydantic's generated property titles ("Eventid")."""
    if isinstance(node, dict):
        out = {k: _untitled(v) for k, v in node.items() if k != "title" or "properties" in node}
        if isinstance(out.get("properties"), dict):
            out["properties"] = {
                name: {k: v for k, v in prop.items() if k != "title"}
                for name, prop in out["properties"].items()
            }
        return out
    if isinstance(node, list):
        return [_untitled(v) for v in node]
    return node


def json_schemas() -> dict[str, dict[str, Any]]:
    return {t: json_schema(t) for t in EVENT_TYPES}


def parse_detail(detail: dict[str, Any]) -> DomainEvent:
    """An event back from its ``detail`` (strict: unknown fields are refused)."""
    event_type = detail.get("type")
    if event_type not in MODELS:
        raise ValueError(f"unknown event type {event_type!r}")
    event = MODELS[event_type].model_validate(detail)
    assert isinstance(event, MemoryEvent | MemoryUpdated | UserErased | TeamSettingsChanged)
    return event


def schemas_markdown() -> str:
    """The schema section of ``docs/events.md`` (``python -m engram.events.models`` prints it;
    a test keeps the document equal to it)."""
    import json

    parts = []
    for event_type, schema in json_schemas().items():
        parts.append(
            f"### `{event_type}` (version {schema_version(event_type)})\n\n```json\n"
            + json.dumps(schema, indent=2, ensure_ascii=False)
            + "\n```\n"
        )
    return "\n".join(parts)


if __name__ == "__main__":
    print(schemas_markdown(), end="")
