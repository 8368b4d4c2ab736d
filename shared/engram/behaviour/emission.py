"""Server-side emission: raw ``query`` and ``tool`` events become observations.

Rules are configurable (``EmissionRules``; ``Settings.emission_rules_file`` JSON): domain
regexes, meta-tool names (never observed) and JMESPath entity rules applied to tool results.
"""

from __future__ import annotations

import hashlib
import json
import logging
import re
from collections.abc import Sequence
from functools import cached_property
from pathlib import Path
from typing import Any

import jmespath
from pydantic import BaseModel, ConfigDict, Field, ValidationError, field_validator
from pydantic.alias_generators import to_camel

from engram import limits
from engram.behaviour.commands import QueryAsked, ToolRan
from engram.behaviour.models import MAX_CONTENT_CHARS, Observation, ObservationType
from engram.behaviour.sanitize import clean_text

log = logging.getLogger(__name__)

MAX_QUERY_CHARS = 500
MAX_ENTITIES_PER_RESULT = 20


class _Camel(BaseModel):
    model_config = ConfigDict(alias_generator=to_camel, populate_by_name=True, extra="forbid")


class EntityRule(_Camel):
    """Entities a tool result names: ``select`` picks objects, ``id``/``name`` read them."""

    tool_name: str
    entity_type: str = Field(min_length=1, max_length=limits.MAX_NAME_CHARS)
    select: str = "@"
    id: str
    name: str | None = None

    @field_validator("select", "id", "name")
    @classmethod
    def _compiles(cls, value: str | None) -> str | None:
        if value is not None:
            try:
                jmespath.compile(value)
            except jmespath.exceptions.JMESPathError as exc:
                raise ValueError(f"invalid JMESPath expression: {exc}") from None
        return value


DEFAULT_DOMAIN_PATTERNS: dict[str, str] = {
    "royalty": r"\broyalt(?:y|ies)\b",
    "contract": r"\bcontracts?\b",
    "account": r"\baccounts?\b",
    "product": r"\bproducts?\b",
    "revenue": r"\brevenues?\b",
}
DEFAULT_META_TOOLS: tuple[str, ...] = (
    "search_catalog",
    "search_tools",
    "memory_save",
    "memory_recall",
)
DEFAULT_ENTITY_RULES: tuple[EntityRule, ...] = (
    EntityRule(
        tool_name="get_account",
        entity_type="account",
        select="account || @",
        id="id || accountId || account_id",
        name="name || accountName || account_name",
    ),
    EntityRule(
        tool_name="search_snowflake_schema",
        entity_type="schema_table",
        select="tables || results || @",
        id="fullName || full_name || qualifiedName || name || table_name",
        name="name || table_name",
    ),
    EntityRule(
        tool_name="get_products_by_isrc",
        entity_type="product",
        select="products || items || @",
        id="isrc || id",
        name="title || name",
    ),
)


class EmissionRules(_Camel):
    domain_patterns: dict[str, str] = Field(default_factory=lambda: dict(DEFAULT_DOMAIN_PATTERNS))
    meta_tools: list[str] = Field(default_factory=lambda: list(DEFAULT_META_TOOLS))
    entity_rules: list[EntityRule] = Field(default_factory=lambda: list(DEFAULT_ENTITY_RULES))

    @field_validator("domain_patterns")
    @classmethod
    def _regexes(cls, value: dict[str, str]) -> dict[str, str]:
        for domain, pattern in value.items():
            try:
                re.compile(pattern)
            except re.error as exc:
                raise ValueError(f"domain {domain!r}: invalid regex: {exc}") from None
        return value

    @classmethod
    def from_file(cls, path: Path | None) -> EmissionRules:
        """Rules from a JSON file (camelCase keys); defaults when ``path`` is None."""
        if path is None:
            return cls()
        return cls.model_validate_json(Path(path).read_text(encoding="utf-8"))

    @cached_property
    def _compiled(self) -> list[tuple[str, re.Pattern[str]]]:
        return [(d, re.compile(p, re.IGNORECASE)) for d, p in self.domain_patterns.items()]

    def domains_of(self, text: str) -> list[str]:
        return [d for d, rx in self._compiled if rx.search(text)]

    def rules_for(self, tool_name: str) -> list[EntityRule]:
        return [r for r in self.entity_rules if r.tool_name == tool_name]


def _scalar(value: Any, max_chars: int | None = None) -> str | None:
    """A string, number or id in a tool result as text; ``max_chars`` truncates (names only:
    an id too long for the rule is kept whole, and the entity is then skipped)."""
    if isinstance(value, bool) or value is None:
        return None
    if isinstance(value, str | int | float):
        text = str(value).strip()
        if max_chars is not None:
            text = text[:max_chars].rstrip()
        return text or None
    return None


def extract_entities(rule: EntityRule, result: Any) -> list[tuple[str, str | None]]:
    """(entityId, entityName) pairs a tool result names according to ``rule``."""
    try:
        selected = jmespath.search(rule.select, result)
    except jmespath.exceptions.JMESPathError:
        return []
    items = selected if isinstance(selected, list) else [selected]
    out: list[tuple[str, str | None]] = []
    for item in items[:MAX_ENTITIES_PER_RESULT]:
        if not isinstance(item, dict):
            continue
        try:
            entity_id = _scalar(jmespath.search(rule.id, item))
            name = (
                _scalar(jmespath.search(rule.name, item), limits.MAX_NAME_CHARS)
                if rule.name
                else None
            )
        except jmespath.exceptions.JMESPathError:
            continue
        if entity_id is not None:
            out.append((entity_id, name))
    return out


class _Ids:
    def __init__(self, identity_id: str, batch_id: str | None) -> None:
        self.identity_id = identity_id
        self.batch_id = batch_id

    def make(self, *parts: object) -> str | None:
        if self.batch_id is None:
            return None
        raw = json.dumps([self.identity_id, self.batch_id, *parts], default=str)
        return hashlib.sha256(raw.encode()).hexdigest()[:32]


def _obs(ids: _Ids, key: tuple[object, ...], **fields: Any) -> Observation:
    obs_id = ids.make(*key)
    if obs_id is not None:
        fields["id"] = obs_id
    return Observation(identity_id=ids.identity_id, **fields)


def observations_from_events(
    identity_id: str,
    events: Sequence[QueryAsked | ToolRan],
    *,
    now_ms: int,
    rules: EmissionRules | None = None,
    batch_id: str | None = None,
) -> list[Observation]:
    """Observations derived from raw events.

    With ``batch_id`` (e.g. the request id) the observation ids are deterministic, so a
    redelivered batch appends nothing new.
    """
    rules = rules or EmissionRules()
    ids = _Ids(identity_id, batch_id)
    meta = set(rules.meta_tools)
    out: list[Observation] = []
    for ref, event in enumerate(events):
        if isinstance(event, QueryAsked):
            out += _query_observations(ids, ref, event, rules, now_ms)
        elif event.tool_name not in meta:
            out += _tool_observations(ids, ref, event, rules, now_ms)
    return out


def _query_observations(
    ids: _Ids, ref: int, event: QueryAsked, rules: EmissionRules, now_ms: int
) -> list[Observation]:
    """One ``query_pattern`` per domain the query's text mentions."""
    query = event.text[:MAX_QUERY_CHARS]
    return [
        _obs(
            ids,
            (ref, "q", domain),
            type=ObservationType.QUERY_PATTERN,
            content=f"Asked about {domain}",
            metadata={"domain": domain, "query": query},
            created_at=now_ms,
        )
        for domain in rules.domains_of(event.text)
    ]


def _tool_observations(
    ids: _Ids, ref: int, event: ToolRan, rules: EmissionRules, now_ms: int
) -> list[Observation]:
    """A ``tool_success`` and the entities its result names, or a ``tool_failure``."""
    tool = event.tool_name
    shown = clean_text(tool, max_len=limits.MAX_NAME_CHARS)
    if not event.ok:
        return [
            _obs(
                ids,
                (ref, "fail"),
                type=ObservationType.TOOL_FAILURE,
                content=f"Tool {shown} failed",
                metadata={
                    "toolName": tool,
                    "durationMs": event.duration_ms,
                    "error": event.error or "error",
                },
                created_at=now_ms,
            )
        ]
    out = [
        _obs(
            ids,
            (ref, "ok"),
            type=ObservationType.TOOL_SUCCESS,
            content=f"Tool {shown} succeeded",
            metadata={"toolName": tool, "durationMs": event.duration_ms},
            created_at=now_ms,
        )
    ]
    for rule in rules.rules_for(tool):
        for entity_id, name in extract_entities(rule, event.result):
            entity = _entity(ids, ref, rule, entity_id, name, now_ms)
            if entity is None:
                log.info("skipped an invalid %s entity from %s", rule.entity_type, tool)
            else:
                out.append(entity)
    return out


def _entity(  # noqa: PLR0917 - the parts of one observation
    ids: _Ids, ref: int, rule: EntityRule, entity_id: str, name: str | None, now_ms: int
) -> Observation | None:
    """An ``entity_access``, or None when the entity's id or name breaks the name rule
    (``engram.fields``) or is too long: a tool result is not client input, so the entity is
    skipped and the rest of the batch (its ``tool_success`` included) still counts."""
    metadata: dict[str, Any] = {"entityType": rule.entity_type, "entityId": entity_id}
    if name is not None:
        metadata["entityName"] = name
    label = clean_text(name or entity_id, max_len=limits.MAX_ID_CHARS)
    try:
        return _obs(
            ids,
            (ref, "e", rule.entity_type, entity_id),
            type=ObservationType.ENTITY_ACCESS,
            content=f"Accessed {rule.entity_type} {label}"[:MAX_CONTENT_CHARS],
            metadata=metadata,
            created_at=now_ms,
        )
    except ValidationError:
        return None
