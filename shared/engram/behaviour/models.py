"""Observations (raw events) and facts (consolidated beliefs) of behavioural memory.

JSON is camelCase (``identityId``, ``createdAt`` …); Python attributes are snake_case.
Validation errors name the field: ``content``, ``metadata``, ``metadata.toolName`` …
"""

from __future__ import annotations

import uuid
from collections.abc import Mapping, Sequence
from typing import Any

from pydantic import (
    BaseModel,
    ConfigDict,
    Field,
    TypeAdapter,
    ValidationError,
    ValidationInfo,
    field_validator,
)
from pydantic.alias_generators import to_camel
from pydantic_core import PydanticCustomError

from engram import limits
from engram.behaviour import kinds
from engram.behaviour.kinds import (
    KINDS,
    CategoryName,
    FactCategory,
    KindName,
    Metadata,
    ObservationType,
)
from engram.errors import InvalidInput
from engram.fields import (
    check_json,
    compact_json,
    json_size,
    refused_class,
)

__all__ = [
    "MAX_CONTENT_CHARS",
    "MAX_IDENTITY_CHARS",
    "MAX_METADATA_BYTES",
    "METADATA",
    "TRUSTED",
    "Fact",
    "FactCategory",
    "Observation",
    "ObservationType",
    "fact_id",
    "metadata_to_fact_key",
    "observation_to_fact_key",
    "parse_observations",
    "trusted_fact",
    "validate_metadata",
    "validate_metadata_many",
]

MAX_CONTENT_CHARS = limits.MAX_CONTENT_CHARS
MAX_METADATA_BYTES = limits.MAX_METADATA_BYTES
MAX_IDENTITY_CHARS = limits.MAX_IDENTITY_CHARS
#: ``Observation.model_validate*(..., context=TRUSTED)``: data this service stored, whose
#: metadata was checked when it was accepted (reads of the observation log use it).
TRUSTED = {"trusted": True}


class _CamelModel(BaseModel):
    model_config = ConfigDict(
        alias_generator=to_camel, populate_by_name=True, extra="forbid", validate_assignment=False
    )


def _new_id() -> str:
    return uuid.uuid4().hex


# --- metadata per observation kind: the one rule, for the API, emission and the consumer ------
#: kind name -> its metadata model (the table's, ``engram.behaviour.kinds``)
METADATA = kinds.METADATA


def _metadata_error(err: Mapping[str, Any], obs_type: str) -> PydanticCustomError:
    loc = err.get("loc") or ()
    key = str(loc[0]) if loc else "metadata"
    if err.get("type") == "missing":
        return PydanticCustomError(
            "metadata_missing",
            "metadata.{key} is required for {type} observations",
            {"key": key, "type": str(obs_type)},
        )
    return PydanticCustomError(
        "metadata_invalid", "metadata.{key}: {msg}", {"key": key, "msg": str(err.get("msg"))}
    )


def validate_metadata(obs_type: str, value: Mapping[str, Any]) -> dict[str, Any]:
    """``value`` checked as ``obs_type``'s metadata (size, text rule, the type's keys);
    returns it with its names trimmed. Raises ``PydanticCustomError`` whose ``key`` context
    names the metadata key at fault."""
    try:
        size = json_size(value)
    except (TypeError, ValueError) as exc:
        raise PydanticCustomError(
            "metadata_json", "metadata must be JSON-serialisable: {err}", {"err": str(exc)}
        ) from None
    if size > MAX_METADATA_BYTES:
        raise PydanticCustomError(
            "metadata_size", "metadata must be at most {n} bytes of JSON", {"n": MAX_METADATA_BYTES}
        )
    check_json(value)
    try:
        parsed = METADATA[obs_type].model_validate(dict(value))
    except ValidationError as exc:
        raise _metadata_error(exc.errors()[0], obs_type) from None
    return {k: v for k, v in parsed.model_dump(by_alias=True).items() if k in value}


#: one list validator per metadata model: a list of metadata of one kind checked in one call
_METADATA_LISTS: dict[type[Metadata], TypeAdapter[list[Metadata]]] = {}


def _list_adapter(obs_type: str) -> TypeAdapter[list[Metadata]]:
    model = METADATA[obs_type]
    adapter = _METADATA_LISTS.get(model)
    if adapter is None:
        adapter = _METADATA_LISTS[model] = TypeAdapter(list[model])  # type: ignore[valid-type]
    return adapter


def _sizes_fit(values: Sequence[Mapping[str, Any]], size: int) -> bool:
    """Whether each value is at most ``MAX_METADATA_BYTES`` of JSON, given ``size``, the
    bytes of the list's JSON. Measured over groups: a group whose JSON fits has every member
    within the limit (each one's JSON is part of it), so a group that does not fit is halved
    (at worst about twice as many measurements as values). ``TypeError``/``ValueError`` as
    ``json_size``."""
    if size <= MAX_METADATA_BYTES:
        return True
    if len(values) == 1:
        return json_size(values[0]) <= MAX_METADATA_BYTES
    half = len(values) // 2
    head, tail = values[:half], values[half:]
    return _sizes_fit(head, json_size(head)) and _sizes_fit(tail, json_size(tail))


#: metadata measured together: this many values of a usual size are far under the limit
_GROUP = 16
#: whether the text rule refuses an ASCII character that JSON writes as it is (unescaped)
_ASCII_REFUSED = any(
    refused_class(c, name=False) is not None for c in map(chr, range(0x20, 0x80)) if c not in '"\\'
)


def _clean_text(text: str) -> bool:
    """Whether unescaped JSON ``text`` holds no character the text rule refuses."""
    if text.isascii() and not _ASCII_REFUSED:
        return True
    return refused_class(text, name=False) is None


def _within_limits(values: Sequence[Mapping[str, Any]]) -> bool:
    """Whether each value is at most ``MAX_METADATA_BYTES`` of JSON and holds no key or string
    the text rule refuses, group by group (one JSON encoding each). ``TypeError``/``ValueError``
    as ``json_size`` and ``check_json`` raise them (``PydanticCustomError`` is a ValueError)."""
    for start in range(0, len(values), _GROUP):
        group = values[start : start + _GROUP]
        text = compact_json(group)
        if not _sizes_fit(group, len(text.encode("utf-8", errors="surrogatepass"))):
            return False
        # JSON without an escape holds every character of every key and string as it is, so
        # when it holds no character the text rule refuses, none of them does
        if "\\" in text or not _clean_text(text):
            check_json(group)
    return True


def validate_metadata_many(
    items: Sequence[tuple[str, Mapping[str, Any]]],
) -> list[dict[str, Any]] | None:
    """What ``validate_metadata(obs_type, value)`` returns for each ``(obs_type, value)``,
    checked by the same rules for the whole list at once (sizes and the text rule over groups
    of values, each type's keys in one call for all values of that type), or ``None`` when any
    value fails one: ``validate_metadata``, value by value, then says which and why."""
    values = [v if type(v) is dict else dict(v) for _, v in items]
    try:
        if not _within_limits(values):
            return None
    except (TypeError, ValueError):
        return None
    by_type: dict[str, list[int]] = {}
    for index, (obs_type, _) in enumerate(items):
        by_type.setdefault(obs_type, []).append(index)
    out: list[dict[str, Any]] = [{}] * len(items)
    for obs_type, indexes in by_type.items():
        adapter = _list_adapter(obs_type)
        try:
            parsed = adapter.validate_python([values[i] for i in indexes])
        except ValidationError:
            return None
        for index, dumped in zip(indexes, adapter.dump_python(parsed, by_alias=True), strict=True):
            value = values[index]
            # the dump has every key sent; a key more is an optional one left out (its default)
            same = len(dumped) == len(value)
            out[index] = dumped if same else {k: v for k, v in dumped.items() if k in value}
    return out


class Observation(_CamelModel):
    """An append-only record of something that happened during a session."""

    id: str = Field(default_factory=_new_id, min_length=1, max_length=limits.MAX_ID_CHARS)
    identity_id: str = Field(min_length=1, max_length=MAX_IDENTITY_CHARS)
    type: KindName  # a registered kind's name (the ObservationType member for a built-in)
    content: str = Field(default="", max_length=MAX_CONTENT_CHARS)
    metadata: dict[str, Any] = Field(default_factory=dict)
    created_at: int = Field(ge=0, description="Epoch ms (client time; not the cursor).")
    seq: int | None = Field(
        default=None,
        description="Arrival sequence assigned by the log on append; None until stored.",
    )

    @field_validator("metadata", mode="before")
    @classmethod
    def _metadata_ok(cls, value: Any, info: ValidationInfo) -> Any:
        if (info.context or {}).get("trusted") or not isinstance(value, Mapping):
            return value  # stored data was checked on the way in; non-objects fail below
        obs_type = info.data.get("type")
        if obs_type not in METADATA:  # no valid type: the type's own error says why
            return value
        try:
            return validate_metadata(obs_type, value)
        except PydanticCustomError:
            raise
        except (TypeError, ValueError) as exc:  # NaN and other values JSON cannot hold
            raise PydanticCustomError(
                "metadata_json", "metadata must be JSON-serialisable: {err}", {"err": str(exc)}
            ) from None

    def to_storage_json(self) -> str:
        """Compact JSON for a store (camelCase, without the store-assigned ``seq``)."""
        return self.model_dump_json(by_alias=True, exclude={"seq"})


class Fact(_CamelModel):
    """A durable belief about a user derived from one or more observations.

    ``confidence`` as stored is the strength as of ``last_reinforced_at``; facts returned by
    ``consolidate`` and the service carry their *current* (decayed) confidence instead.
    """

    id: str
    identity_id: str = Field(min_length=1, max_length=MAX_IDENTITY_CHARS)
    category: CategoryName  # a registered category (the FactCategory member for a built-in)
    subject: str
    content: str
    confidence: float = Field(ge=0.0, le=1.0)
    reinforcement_count: int = Field(ge=0)
    last_reinforced_at: int
    created_at: int
    updated_at: int
    ease_factor: float | None = None
    round_cursor: int | None = Field(
        default=None,
        description="Arrival sequence up to which this fact has been reinforced (fencing).",
    )

    def to_storage_json(self) -> str:
        return self.model_dump_json(by_alias=True, exclude_none=True)

    def evolve(self, **changes: Any) -> Fact:
        """A copy with ``changes`` (snake_case field names), *without validation*: only for
        values the caller computed from an already valid fact (decay, consolidation). About
        four times cheaper than ``model_copy(update=...)``."""
        unknown = changes.keys() - _FACT_FIELDS
        if unknown:
            raise AttributeError(f"Fact has no field(s) {sorted(unknown)}")
        return trusted_fact({**self.__dict__, **changes})

    def rank(self) -> float:
        """Prompt ranking score: confidence × reinforcementCount."""
        return self.confidence * self.reinforcement_count


_FACT_FIELDS = frozenset(Fact.model_fields)
_new_fact = Fact.__new__
_set_attr = object.__setattr__


def trusted_fact(values: dict[str, Any]) -> Fact:
    """A ``Fact`` over ``values`` (every field, snake_case; the dict is taken, not copied)
    *without validation*: only for data this package wrote or computed from valid facts.
    About ten times cheaper than ``Fact(**values)``; the hot path of consolidation."""
    fact = _new_fact(Fact)
    _set_attr(fact, "__dict__", values)
    _set_attr(fact, "__pydantic_fields_set__", set(_FACT_FIELDS))
    _set_attr(fact, "__pydantic_extra__", None)
    _set_attr(fact, "__pydantic_private__", None)
    return fact


def fact_id(subject: str) -> str:
    return f"fact:{subject}"


def observation_to_fact_key(obs: Observation) -> tuple[str, str]:
    """The (category, subject) an observation reinforces: a query's domain, a tool's name,
    a result's entity (its kind's key fields)."""
    return metadata_to_fact_key(obs.type, obs.metadata)


def metadata_to_fact_key(obs_type: str, metadata: Mapping[str, Any]) -> tuple[str, str]:
    """(category, ``category:key``) of an observation of kind ``obs_type``; ``ValueError``
    for a name no kind has."""
    kind = KINDS.get(obs_type)
    if kind is None:
        raise ValueError(f"{obs_type!r} is not an observation kind")
    return kind.category, f"{kind.category}:{kind.key(metadata)}"


def _error_field(prefix: str, err: Mapping[str, Any]) -> str:
    parts = [prefix, *(str(p) for p in err.get("loc", ()))]
    key = (err.get("ctx") or {}).get("key")
    if key is not None and parts[-1] == "metadata":
        parts.append(str(key))
    return ".".join(p for p in parts if p)


def parse_observations(
    items: Sequence[Mapping[str, Any]], *, identity_id: str, field: str = "observations"
) -> list[Observation]:
    """Validate a whole batch (camelCase or snake_case keys) before anything is stored.

    ``identityId`` comes from the caller, never from the payload. The first bad item raises
    ``InvalidInput`` naming the field, e.g. ``observations.2.metadata.toolName``.
    """
    out: list[Observation] = []
    for index, item in enumerate(items):
        if not isinstance(item, Mapping):
            raise InvalidInput(f"{field}.{index}", "must be an object")
        data = {k: v for k, v in item.items() if k not in {"identityId", "identity_id", "seq"}}
        data["identityId"] = identity_id
        try:
            out.append(Observation.model_validate(data))
        except ValidationError as exc:
            first = exc.errors()[0]
            raise InvalidInput(
                _error_field(f"{field}.{index}", first), first["msg"], details=exc.errors()
            ) from None
    return out
