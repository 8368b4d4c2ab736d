"""Observation kinds: one frozen definition per kind, and the one table every rule reads.

A kind says, once: the metadata its observations carry, its letter in the Redis log, the fact
it reinforces (``FactKind``: the category, the prompt group its facts are listed under and the
text of a new fact), the key fields whose values, joined by ``:``, make the fact's subject
``category:key``, its display label (``None``: the last key field; a function: a label the
log stores), and its counterpart (the other outcome of one thing: a tool's success and
failure). A paired kind's quality is its share of the pair's observations in a round; any
other kind's is 1.0. The built-in kinds are the members of ``ObservationType`` and
``FactCategory``; ``register_kind`` adds kinds at runtime (their names are plain strings).
"""

from __future__ import annotations

import re
import threading
from collections.abc import Callable, Iterable, Iterator, Mapping
from contextlib import contextmanager
from dataclasses import dataclass, field
from enum import StrEnum
from functools import cache
from string import Formatter
from typing import Annotated, Any

from pydantic import ConfigDict, Field, GetCoreSchemaHandler
from pydantic_core import PydanticCustomError, core_schema

from engram.behaviour.sanitize import quote_name
from engram.fields import Identifier, InputModel, Name


class ObservationType(StrEnum):
    TOOL_SUCCESS = "tool_success"
    TOOL_FAILURE = "tool_failure"
    ENTITY_ACCESS = "entity_access"
    QUERY_PATTERN = "query_pattern"


class FactCategory(StrEnum):
    TOOL_AFFINITY = "tool_affinity"
    TOOL_AVOIDANCE = "tool_avoidance"
    ENTITY_FREQUENCY = "entity_frequency"
    DOMAIN_PREFERENCE = "domain_preference"
    FAILURE_PATTERN = "failure_pattern"


# --- metadata per observation kind --------------------------------------------------------
#: a non-negative number, kept as sent (an integer stays an integer)
Duration = Annotated[int, Field(ge=0)] | Annotated[float, Field(ge=0, allow_inf_nan=False)]


class Metadata(InputModel):
    """The keys an observation kind requires; any other key is free JSON (text rule). Key
    fields are ``Name`` or ``Identifier`` (free of control characters: the log groups by
    them)."""

    model_config = ConfigDict(extra="allow", validate_by_name=False)


class ToolSuccessMetadata(Metadata):
    tool_name: Name
    duration_ms: Duration


class ToolFailureMetadata(Metadata):
    tool_name: Name
    duration_ms: Duration
    error: str


class EntityAccessMetadata(Metadata):
    entity_type: Name
    entity_id: Identifier
    entity_name: Name | None = None


class QueryPatternMetadata(Metadata):
    domain: Name
    query: str


# --- the definitions ------------------------------------------------------------------------
@dataclass(frozen=True, slots=True)
class PromptGroup:
    """A titled group of the prompt section; groups are rendered by ascending ``order``."""

    title: str
    order: int


@dataclass(frozen=True, slots=True)
class FactKind:
    """A fact category: its prompt group and the text of a new fact (``{name}`` is the quoted
    label, ``{<keyField>}`` a quoted key field of the subject)."""

    category: str
    group: PromptGroup
    content: str


@dataclass(frozen=True, slots=True)
class ObservationKind:
    """One observation kind (see the module docstring)."""

    name: str
    letter: str
    metadata: type[Metadata]
    key_fields: tuple[str, ...]
    fact: FactKind
    label: Callable[[Mapping[str, Any]], str] | None = None
    counterpart: str | None = None
    #: on which side of its pair it counts (``KeyGroup.successes`` or ``failures``)
    succeeds: bool = True

    @property
    def category(self) -> str:
        return self.fact.category

    @property
    def stores_label(self) -> bool:
        """Whether the log stores the label (else it is the last key field)."""
        return self.label is not None

    def key(self, metadata: Mapping[str, Any]) -> str:
        """The key field values joined by ``:`` (the subject without ``category:``)."""
        fields = self.key_fields
        if len(fields) == 1:
            return str(metadata[fields[0]])
        return ":".join([str(metadata[f]) for f in fields])

    def label_of(self, metadata: Mapping[str, Any]) -> str:
        if self.label is None:
            return str(metadata[self.key_fields[-1]])
        return self.label(metadata)

    def log_key(self, metadata: Mapping[str, Any]) -> str:
        """What the log groups the kind's observations by: a paired kind's key (shared with
        its counterpart), any other kind's subject."""
        key = self.key(metadata)
        return key if self.counterpart is not None else f"{self.fact.category}:{key}"

    def label_from_key(self, key: str) -> str:
        """The label when none is stored: the last key field."""
        if len(self.key_fields) == 1:
            return key
        return key.split(":", len(self.key_fields) - 1)[-1]


def _entity_label(metadata: Mapping[str, Any]) -> str:
    name = metadata.get("entityName")
    return str(name) if name else str(metadata["entityId"])


_TOOLS = PromptGroup("Tool preferences", 10)
_ENTITIES = PromptGroup("Frequent entities", 20)
_DOMAINS = PromptGroup("Domain focus", 30)
_ISSUES = PromptGroup("Known issues", 40)

#: the built-in kinds, in the order of ``ObservationType``
BUILT_IN: tuple[ObservationKind, ...] = (
    ObservationKind(
        ObservationType.TOOL_SUCCESS,
        "s",
        ToolSuccessMetadata,
        ("toolName",),
        FactKind(FactCategory.TOOL_AFFINITY, _TOOLS, "Tool {name} works well for this user"),
        counterpart=ObservationType.TOOL_FAILURE,
    ),
    ObservationKind(
        ObservationType.TOOL_FAILURE,
        "f",
        ToolFailureMetadata,
        ("toolName",),
        FactKind(FactCategory.TOOL_AVOIDANCE, _ISSUES, "Tool {name} tends to fail for this user"),
        counterpart=ObservationType.TOOL_SUCCESS,
        succeeds=False,
    ),
    ObservationKind(
        ObservationType.ENTITY_ACCESS,
        "e",
        EntityAccessMetadata,
        ("entityType", "entityId"),
        FactKind(
            FactCategory.ENTITY_FREQUENCY, _ENTITIES, "Frequently works with {entityType} {name}"
        ),
        label=_entity_label,
    ),
    ObservationKind(
        ObservationType.QUERY_PATTERN,
        "d",
        QueryPatternMetadata,
        ("domain",),
        FactKind(FactCategory.DOMAIN_PREFERENCE, _DOMAINS, "Often asks about {name}"),
    ),
)
#: categories no kind produces (kept: stored facts may carry them)
UNPRODUCED: tuple[FactKind, ...] = (
    FactKind(FactCategory.FAILURE_PATTERN, _ISSUES, "Recurring issue: {name}"),
)

# --- the table ------------------------------------------------------------------------------
#: kind name -> kind (the keys of built-ins are the ``ObservationType`` members)
KINDS: dict[str, ObservationKind] = {}
#: storage letter -> kind
LETTERS: dict[str, ObservationKind] = {}
#: category -> its definition (the keys of built-ins are the ``FactCategory`` members)
CATEGORIES: dict[str, FactKind] = {}
#: category -> the key fields of the kind producing it (``()`` when none does)
KEY_FIELDS: dict[str, tuple[str, ...]] = {}
#: kind name -> metadata model (``engram.behaviour.models.METADATA``)
METADATA: dict[str, type[Metadata]] = {}


@dataclass(frozen=True, slots=True)
class Derivation:
    """What the table implies: the prompt groups (title, categories) in order, each
    category's group index, and the letters whose label the log stores."""

    groups: tuple[tuple[str, tuple[str, ...]], ...] = ()
    group_of: Mapping[str, int] = field(default_factory=dict)
    labelled_letters: str = ""


class Derived:
    """The table's current ``Derivation``, rebuilt whole on every change and swapped in one
    assignment, so a reader never pairs one change's groups with another's index."""

    now: Derivation = Derivation()


_LOCK = threading.Lock()
_NAME = re.compile(r"[a-z][a-z0-9_]{0,63}")
#: ``l`` marks a stored label in the pending aggregate; a letter is what Lua's ``%a`` matches
_LETTER = re.compile(r"[a-km-zA-Z]")


def _rebuild() -> None:
    facts = [k.fact for k in KINDS.values()] + list(UNPRODUCED)
    titles: dict[str, tuple[int, list[str]]] = {}
    for fact in facts:
        titles.setdefault(fact.group.title, (fact.group.order, []))[1].append(fact.category)
    ordered = sorted(titles.items(), key=lambda item: item[1][0])
    groups = tuple((title, tuple(cats)) for title, (_, cats) in ordered)
    Derived.now = Derivation(
        groups,
        {c: i for i, (_, cats) in enumerate(groups) for c in cats},
        "".join(k.letter for k in KINDS.values() if k.stores_label),
    )


def _refusal(kinds: tuple[ObservationKind, ...]) -> str | None:
    """Why ``kinds`` cannot join the table, or None."""
    names = [k.name for k in kinds]
    letters = [k.letter for k in kinds]
    cats = [k.category for k in kinds]
    if any(len(set(values)) < len(values) for values in (names, letters, cats)):
        return "two kinds given share a name, a letter or a category"
    orders = {f.group.title: f.group.order for f in [*CATEGORIES.values()]}
    titles = {order: title for title, order in orders.items()}
    for kind in kinds:
        if not _NAME.fullmatch(kind.name) or not _NAME.fullmatch(kind.category):
            return f"{kind.name!r}: names and categories are snake_case"
        if kind.name in KINDS or kind.category in CATEGORIES:
            return f"{kind.name!r}: the name or the category {kind.category!r} is taken"
        if not _LETTER.fullmatch(kind.letter) or kind.letter in LETTERS:
            return f"{kind.name!r}: the letter {kind.letter!r} is taken or not one ASCII letter"
        if not kind.key_fields or not issubclass(kind.metadata, Metadata):
            return f"{kind.name!r}: key fields of a Metadata model are required"
        aliases = {f.alias or n for n, f in kind.metadata.model_fields.items()}
        if not set(kind.key_fields) <= aliases:
            return f"{kind.name!r}: every key field is a field of its metadata"
        group = kind.fact.group
        if orders.setdefault(group.title, group.order) != group.order:
            return f"{kind.name!r}: the group {group.title!r} has another order"
        if titles.setdefault(group.order, group.title) != group.title:
            return f"{kind.name!r}: the order {group.order} is another group's"
        pair = kind.counterpart
        other = next((k for k in kinds if k.name == pair), None) or KINDS.get(pair or "")
        if pair is not None and (
            other is None or other.counterpart != kind.name or other.succeeds == kind.succeeds
        ):
            return f"{kind.name!r}: its counterpart is registered with it, naming it back"
        if pair is not None and kind.stores_label:
            # the log keeps one label per key, shared by both outcomes of a pair
            return f"{kind.name!r}: a kind with a counterpart has no stored label"
        unknown = placeholders(kind.fact.content) - {"name", *kind.key_fields}
        if unknown:
            return f"{kind.name!r}: its fact text names {sorted(unknown)}, not a key field"
    return None


def register_kind(*kinds: ObservationKind) -> None:
    """Add ``kinds`` (a pair together) to the table; ``ValueError`` when a name, letter or
    category is taken, a group's order disagrees, or a counterpart does not name it back."""
    with _LOCK:
        why = _refusal(kinds)
        if why is not None:
            raise ValueError(f"cannot register observation kind: {why}")
        for kind in kinds:
            _add(kind)
        _rebuild()


def _add(kind: ObservationKind) -> None:
    KINDS[kind.name] = kind
    LETTERS[kind.letter] = kind
    CATEGORIES[kind.category] = kind.fact
    KEY_FIELDS[kind.category] = kind.key_fields
    METADATA[kind.name] = kind.metadata


def unregister_kind(*names: str) -> None:
    """Remove registered kinds (never a built-in one: ``ValueError``)."""
    with _LOCK:
        for name in names:
            kind = KINDS.get(name)
            if kind is None or isinstance(kind.name, ObservationType):
                raise ValueError(f"{name!r} is not a registered observation kind")
        for name in names:
            kind = KINDS.pop(name)
            del LETTERS[kind.letter], CATEGORIES[kind.category], KEY_FIELDS[kind.category]
            del METADATA[name]
        _rebuild()


@contextmanager
def registered(*kinds: ObservationKind) -> Iterator[tuple[ObservationKind, ...]]:
    """``register_kind(*kinds)`` for the duration of a ``with`` block (tests)."""
    register_kind(*kinds)
    try:
        yield kinds
    finally:
        unregister_kind(*(k.name for k in kinds))


for _kind in BUILT_IN:
    _add(_kind)
for _fact in UNPRODUCED:
    CATEGORIES[_fact.category] = _fact
    KEY_FIELDS[_fact.category] = ()
_rebuild()


# --- names as model fields --------------------------------------------------------------------
def _one_of(names: Iterable[str]) -> str:
    quoted = [f"'{n}'" for n in names]
    return quoted[0] if len(quoted) == 1 else ", ".join(quoted[:-1]) + " or " + quoted[-1]


def _as_held(table: Mapping[str, Any], value: Any, name_of: Callable[[Any], str]) -> str:
    """``value`` as ``table`` holds it (the enum member for a built-in name), or the enum
    error naming every name held."""
    entry = table.get(value) if isinstance(value, str) else None
    if entry is None:
        raise PydanticCustomError(
            "enum", "Input should be {expected}", {"expected": _one_of(tuple(table))}
        )
    return name_of(entry)


def _observation_type(value: Any) -> str:
    return _as_held(KINDS, value, lambda kind: kind.name)


def _fact_category(value: Any) -> str:
    return _as_held(CATEGORIES, value, lambda fact: fact.category)


@dataclass(frozen=True, slots=True)
class _TableName:
    """A name the table validates, serialised as the string it is (by pydantic-core, with no
    Python call per value: observations and facts are serialised on hot paths)."""

    validate: Callable[[Any], str]

    def __get_pydantic_core_schema__(
        self, source: Any, handler: GetCoreSchemaHandler
    ) -> core_schema.CoreSchema:
        return core_schema.no_info_plain_validator_function(
            self.validate,
            serialization=core_schema.simple_ser_schema("str"),
            json_schema_input_schema=core_schema.str_schema(),
        )


#: ``Observation.type``: a registered kind's name
KindName = Annotated[str, _TableName(_observation_type)]
#: ``Fact.category``: a registered category
CategoryName = Annotated[str, _TableName(_fact_category)]


def fact_content(category: str, label: str, subject: str) -> str:
    """Display text of a new fact; names are sanitised and quoted (inert data)."""
    fact = CATEGORIES.get(category)
    if fact is None:
        return f"Recurring issue: {quote_name(label)}"
    values: dict[str, str] = {"name": quote_name(label)}
    named = placeholders(fact.content)
    if len(named) > ("name" in named):  # names a key field: from the subject, quoted and short
        fields = KEY_FIELDS[category]
        parts = subject.split(":", len(fields))[1:]
        for index, key_field in enumerate(fields):
            text = parts[index] if index < len(parts) else "entity"
            values[key_field] = quote_name(text, max_len=32)
    return fact.content.format_map(values)


@cache
def placeholders(text: str) -> frozenset[str]:
    """The fields a fact text names (``{name}``, ``{<keyField>}``)."""
    return frozenset(name for _, name, _, _ in Formatter().parse(text) if name)
