"""The field types of client input: one rule per kind of value, shared by every model.

Two character rules, each a set of refused code points, each stated once here and used both
to validate (pydantic) and to document (the JSON Schema ``pattern`` of the OpenAPI document):

* **text** (values, content, messages, prompts, free-form JSON strings and keys): no NUL and
  no unpaired UTF-16 surrogate. Neither can be stored in PostgreSQL or encoded as UTF-8.
* **names** — everything that identifies or labels: ids (``personaId``, ``sourceChannelId``,
  path ids, the ids of tokens), memory keys, tool names, entity types, ids and names, domains,
  group names. Also no control character (C0, DEL and C1, U+0000–U+001F and U+007F–U+009F),
  no bidirectional control (U+061C, U+200E–U+200F, embeddings and overrides U+202A–U+202E,
  isolates U+2066–U+2069) and no zero-width or invisible character (U+200B–U+200D,
  U+2060–U+2064, U+FEFF). Surrounding whitespace is trimmed; nothing may be left blank.
  A name therefore looks the same as it compares: no hidden characters, no text that renders
  reversed.

Values a client sends are refused with 422 naming the field. Names the service *derives* from
tool results (entity ids and names) use :func:`is_clean_name` and are skipped instead.
"""

from __future__ import annotations

import json
import re
from dataclasses import dataclass
from typing import Annotated, Any

from pydantic import (
    AfterValidator,
    BaseModel,
    BeforeValidator,
    ConfigDict,
    Field,
    GetCoreSchemaHandler,
    GetJsonSchemaHandler,
    JsonValue,
    StringConstraints,
)
from pydantic.alias_generators import to_camel
from pydantic.json_schema import JsonSchemaValue
from pydantic_core import InitErrorDetails, PydanticCustomError, ValidationError, core_schema

from engram import limits
from engram.memories.keys import has_identity


@dataclass(frozen=True)
class CharClass:
    """Code points refused by a rule, with the words an error uses for them."""

    what: str
    ranges: tuple[tuple[int, int], ...]

    def regex_class(self) -> str:
        """The ranges as the inside of a regex character class (``\\uXXXX`` escapes, which
        Python's ``re`` and ECMA-262 both read)."""
        return "".join(
            f"\\u{lo:04x}" if lo == hi else f"\\u{lo:04x}-\\u{hi:04x}" for lo, hi in self.ranges
        )


NUL = CharClass("NUL characters", ((0x0000, 0x0000),))
SURROGATES = CharClass("unpaired surrogates", ((0xD800, 0xDFFF),))
CONTROLS = CharClass("control characters", ((0x0001, 0x001F), (0x007F, 0x009F)))
BIDI = CharClass(
    "bidirectional control characters",
    ((0x061C, 0x061C), (0x200E, 0x200F), (0x202A, 0x202E), (0x2066, 0x2069)),
)
INVISIBLE = CharClass(
    "zero-width characters", ((0x200B, 0x200D), (0x2060, 0x2064), (0xFEFF, 0xFEFF))
)

TEXT_CLASSES: tuple[CharClass, ...] = (NUL, SURROGATES)
NAME_CLASSES: tuple[CharClass, ...] = (NUL, SURROGATES, CONTROLS, BIDI, INVISIBLE)


def _compiled(classes: tuple[CharClass, ...]) -> list[tuple[CharClass, re.Pattern[str]]]:
    return [(c, re.compile(f"[{c.regex_class()}]")) for c in classes]


_TEXT_RX = _compiled(TEXT_CLASSES)
_NAME_RX = _compiled(NAME_CLASSES)
# One search over the union decides the common case (nothing refused); the classes are
# searched one by one only to name what was found.
_TEXT_ANY = re.compile(f"[{''.join(c.regex_class() for c in TEXT_CLASSES)}]")
_NAME_ANY = re.compile(f"[{''.join(c.regex_class() for c in NAME_CLASSES)}]")
# The JSON Schema patterns leave unpaired surrogates out: common regex engines (Rust's, which
# schemathesis and jsonschema-rs validate patterns with) cannot state them, and a JSON text
# holding one is not well-formed Unicode to begin with. The server refuses them all the same.
_TEXT_CLASS = "".join(c.regex_class() for c in TEXT_CLASSES if c is not SURROGATES)
_NAME_CLASS = "".join(c.regex_class() for c in NAME_CLASSES if c is not SURROGATES)
#: JSON Schema patterns of the two rules.
TEXT_PATTERN = f"^[^{_TEXT_CLASS}]*$"
#: a name: no refused character, no surrounding whitespace, at least one character
NAME_PATTERN = f"^[^\\s{_NAME_CLASS}](?:[^{_NAME_CLASS}]*[^\\s{_NAME_CLASS}])?$"
#: text that is not blank: at least one character that is not whitespace
NONBLANK_TEXT_PATTERN = f"^[^{_TEXT_CLASS}]*[^\\s{_TEXT_CLASS}][^{_TEXT_CLASS}]*$"


def refused_class(value: str, *, name: bool) -> CharClass | None:
    """The first refused class ``value`` contains (name or text rule), or ``None``."""
    if (_NAME_ANY if name else _TEXT_ANY).search(value) is None:
        return None
    for cls, rx in _NAME_RX if name else _TEXT_RX:
        if rx.search(value):
            return cls
    return None


def is_clean_name(value: str) -> bool:
    """Whether ``value`` passes the name rule (for names derived from tool results)."""
    return bool(value.strip()) and refused_class(value, name=True) is None


def _refuse(value: str, *, name: bool) -> str:
    found = refused_class(value, name=name)
    if found is not None:
        raise PydanticCustomError(
            "refused_characters", "must not contain {what}", {"what": found.what}
        )
    return value


class _Rule:
    """A pydantic annotation that checks a value after its type did (``_check``) and states
    the same rule in the JSON Schema (``_document``)."""

    def __get_pydantic_core_schema__(
        self, source: Any, handler: GetCoreSchemaHandler
    ) -> core_schema.CoreSchema:
        return core_schema.no_info_after_validator_function(self._check, handler(source))

    def __get_pydantic_json_schema__(
        self, schema: core_schema.CoreSchema, handler: GetJsonSchemaHandler
    ) -> JsonSchemaValue:
        return self._document(handler(schema))

    def _check(self, value: Any) -> Any:
        raise NotImplementedError

    def _document(self, schema: JsonSchemaValue) -> JsonSchemaValue:
        raise NotImplementedError


@dataclass(frozen=True)
class _CharRule(_Rule):
    """One character rule, validated and stated as a ``pattern``."""

    name: bool
    nonblank: bool = False

    def _document(self, schema: JsonSchemaValue) -> JsonSchemaValue:
        if self.name:
            schema["pattern"] = NAME_PATTERN
        elif self.nonblank:
            schema["pattern"] = NONBLANK_TEXT_PATTERN
        else:
            schema["pattern"] = TEXT_PATTERN
        return schema

    def _check(self, value: str) -> str:
        # the common case, nothing refused, in one search; ``_refuse`` then names the class
        if (_NAME_ANY if self.name else _TEXT_ANY).search(value) is not None:
            _refuse(value, name=self.name)
        if self.nonblank and not value.strip():
            raise PydanticCustomError("blank", "must not be blank")
        return value


NAME_RULE = _CharRule(name=True)
TEXT_RULE = _CharRule(name=False)
NONBLANK_TEXT_RULE = _CharRule(name=False, nonblank=True)


def _whole_number(value: Any) -> Any:
    """JSON has one number type: ``5.0`` is the integer 5 (as in JSON Schema)."""
    if isinstance(value, float) and value.is_integer():
        return int(value)
    return value


#: Last annotation of an integer field, after its bounds: the integer as JSON Schema means it
#: (``5`` or ``5.0``; never ``"5"`` or ``true``). Bounds placed before it are stated in the
#: JSON Schema as ``minimum`` / ``maximum``: ``Annotated[int, Field(ge=1), WHOLE]``.
WHOLE = BeforeValidator(_whole_number)
_NAME = StringConstraints(strip_whitespace=True, min_length=1)

Identifier = Annotated[str, _NAME, StringConstraints(max_length=limits.MAX_ID_CHARS), NAME_RULE]
Name = Annotated[str, _NAME, StringConstraints(max_length=limits.MAX_NAME_CHARS), NAME_RULE]


def _names_something(key: str) -> str:
    """A key whose canonical form (``engram.memories.keys``) is empty names no memory."""
    if not has_identity(key):
        raise PydanticCustomError("key_identity", "must hold more than punctuation and spaces")
    return key


MemoryKey = Annotated[
    str,
    _NAME,
    StringConstraints(max_length=limits.MAX_KEY_CHARS),
    NAME_RULE,
    AfterValidator(_names_something),
]
FactId = Annotated[str, _NAME, StringConstraints(max_length=limits.MAX_FACT_ID_CHARS), NAME_RULE]
Text = Annotated[str, TEXT_RULE]
MemoryValue = Annotated[
    str, StringConstraints(min_length=1, max_length=limits.MAX_VALUE_CHARS), NONBLANK_TEXT_RULE
]
Content = Annotated[
    str, StringConstraints(min_length=1, max_length=limits.MAX_CONTENT_CHARS), TEXT_RULE
]
QueryText = Annotated[str, StringConstraints(max_length=limits.MAX_CONTENT_CHARS), TEXT_RULE]
ErrorText = Annotated[str, StringConstraints(max_length=limits.MAX_ERROR_CHARS), TEXT_RULE]
MessageText = Annotated[
    str, StringConstraints(min_length=1, max_length=limits.MAX_MESSAGE_CHARS), TEXT_RULE
]
PromptText = Annotated[str, StringConstraints(max_length=limits.MAX_PROMPT_CHARS), TEXT_RULE]
Confidence = Annotated[float, Field(ge=0.0, le=1.0, allow_inf_nan=False)]
EpochMs = Annotated[int, Field(ge=0, le=limits.MAX_EPOCH_MS), WHOLE]


# --- free-form JSON (metadata, tool results, tool arguments) --------------------------------
_COMPACT = json.JSONEncoder(ensure_ascii=False, allow_nan=False, separators=(",", ":"))


def compact_json(value: object) -> str:
    """``value`` as compact JSON text, what ``json_size`` measures (``ValueError`` for NaN,
    ``TypeError`` for what JSON cannot hold)."""
    return _COMPACT.encode(value)


def json_size(value: object) -> int:
    """Bytes of ``value`` as compact UTF-8 JSON (``ValueError`` for NaN, ``TypeError`` for
    what JSON cannot hold)."""
    return len(compact_json(value).encode("utf-8", errors="surrogatepass"))


def check_json(value: Any) -> Any:
    """Every string and object key of a JSON value under the text rule (iterative)."""
    stack = [value]
    while stack:
        node = stack.pop()
        if isinstance(node, str):
            _refuse(node, name=False)
        elif isinstance(node, list):
            stack.extend(node)
        elif isinstance(node, dict):
            for key, item in node.items():
                _refuse(key, name=False)
                stack.append(item)
    return value


#: Where a JSON Schema means "a JSON value under the text rule": the OpenAPI document replaces
#: this marker with a reference to its ``JsonValue`` schema, :data:`CLEAN_JSON_SCHEMA`.
JSON_VALUE_MARKER: dict[str, Any] = {"x-engram-schema": "JsonValue"}


def clean_json_schema(ref: str) -> dict[str, Any]:
    """The JSON Schema of a JSON value whose strings and keys follow the text rule; ``ref``
    is where the document keeps this very schema (it is recursive)."""
    return {
        "anyOf": [
            {"type": "string", "pattern": TEXT_PATTERN},
            {"type": ["number", "boolean", "null"]},
            {"type": "array", "items": {"$ref": ref}},
            {
                "type": "object",
                "propertyNames": {"pattern": TEXT_PATTERN},
                "additionalProperties": {"$ref": ref},
            },
        ]
    }


@dataclass(frozen=True)
class _JsonRule(_Rule):
    """Free-form JSON under the text rule, at most ``max_bytes`` when given."""

    max_bytes: int | None = None

    def _document(self, schema: JsonSchemaValue) -> JsonSchemaValue:
        if schema.get("type") == "object":
            schema["propertyNames"] = {"pattern": TEXT_PATTERN}
            schema["additionalProperties"] = dict(JSON_VALUE_MARKER)
        elif "type" not in schema:
            schema = dict(JSON_VALUE_MARKER)
        if self.max_bytes is not None:
            schema["description"] = f"At most {self.max_bytes} bytes as compact UTF-8 JSON."
        return schema

    def _check(self, value: Any) -> Any:
        check_json(value)
        if self.max_bytes is not None and json_size(value) > self.max_bytes:
            raise PydanticCustomError(
                "json_size", "must be at most {n} bytes as JSON", {"n": self.max_bytes}
            )
        return value


CleanJson = Annotated[JsonValue, _JsonRule()]
ToolResultJson = Annotated[JsonValue, _JsonRule(limits.MAX_TOOL_RESULT_BYTES)]
JsonObject = Annotated[dict[str, JsonValue], _JsonRule()]


def field_error(model: str, field: str, kind: str, message: str, **ctx: Any) -> ValidationError:
    """A validation error of ``model`` located at ``field`` (its JSON name), for a rule that
    spans fields (raise it from a model validator)."""
    detail = InitErrorDetails(
        type=PydanticCustomError(kind, message, ctx or None), loc=(field,), input=None
    )
    return ValidationError.from_exception_data(model, [detail])


# --- model bases ----------------------------------------------------------------------------
#: The model configuration of the API's camelCase JSON: snake_case names in Python, camelCase
#: aliases on the wire, either accepted when validating, aliases when serialising.
CAMEL_CASE = ConfigDict(
    alias_generator=to_camel,
    validate_by_alias=True,
    validate_by_name=True,
    serialize_by_alias=True,
)


class InputModel(BaseModel):
    """Base of every model of client input: camelCase JSON, unknown fields refused, strict
    types (``"5"`` is not a number), frozen. Python code builds one with snake_case names;
    JSON is validated by alias only (``engram.api.http.parse_body`` passes ``by_name=False``),
    so ``persona_id`` in a body is an unknown field."""

    model_config = ConfigDict(**CAMEL_CASE, extra="forbid", strict=True, frozen=True)


class QueryInput(BaseModel):
    """Base of query-string models: values arrive as strings, so types are coerced."""

    model_config = ConfigDict(**CAMEL_CASE, extra="forbid", frozen=True)
