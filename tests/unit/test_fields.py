"""The field rules: one validator per rule, and its JSON Schema pattern says the same thing."""

from __future__ import annotations

import json
import re
from typing import Any

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st
from pydantic import TypeAdapter, ValidationError

from engram import limits
from engram.fields import (
    BIDI,
    CONTROLS,
    INVISIBLE,
    NAME_PATTERN,
    NUL,
    SURROGATES,
    TEXT_PATTERN,
    CleanJson,
    EpochMs,
    Identifier,
    MemoryKey,
    MemoryValue,
    Name,
    ToolResultJson,
    is_clean_name,
    refused_class,
)

IDENTIFIER: TypeAdapter[str] = TypeAdapter(Identifier)
REFUSED_IN_NAMES = {
    "\x00": NUL,
    "\x1b": CONTROLS,
    "\x7f": CONTROLS,
    "\x85": CONTROLS,  # C1 next line
    "\x9b": CONTROLS,  # C1 control sequence introducer
    "\u202e": BIDI,  # right-to-left override
    "\u202a": BIDI,  # left-to-right embedding
    "\u2066": BIDI,  # left-to-right isolate
    "\u2069": BIDI,  # pop directional isolate
    "\u200f": BIDI,  # right-to-left mark
    "\u061c": BIDI,  # Arabic letter mark
    "\u200b": INVISIBLE,  # zero-width space
    "\u200d": INVISIBLE,  # zero-width joiner
    "\u2060": INVISIBLE,  # word joiner
    "\ufeff": INVISIBLE,  # zero-width no-break space
    "\ud800": SURROGATES,
}


@pytest.mark.parametrize(("char", "cls"), REFUSED_IN_NAMES.items(), ids=repr)
def test_each_refused_character_is_refused_in_every_name_type(char: str, cls: Any) -> None:
    assert refused_class(f"a{char}b", name=True) is cls
    for kind in (Identifier, Name, MemoryKey):
        with pytest.raises(ValidationError):
            TypeAdapter(kind).validate_python(f"a{char}b")
    assert not is_clean_name(f"a{char}b")


@pytest.mark.parametrize("char", ["\x1b", "\x85", "\u202e", "\u200b", "\n", "\t"])
def test_text_keeps_everything_but_nul_and_surrogates(char: str) -> None:
    assert TypeAdapter(MemoryValue).validate_python(f"a{char}b") == f"a{char}b"
    for bad in ("\x00", "\ud800"):
        with pytest.raises(ValidationError):
            TypeAdapter(MemoryValue).validate_python(f"a{bad}b")


def test_names_are_trimmed_and_never_blank() -> None:
    assert IDENTIFIER.validate_python("  p1 ") == "p1"
    for blank in ("", "   ", "\u3000"):
        with pytest.raises(ValidationError):
            IDENTIFIER.validate_python(blank)
    with pytest.raises(ValidationError):
        TypeAdapter(MemoryValue).validate_python("   ")


@pytest.mark.parametrize(
    ("kind", "limit"),
    [
        (Identifier, limits.MAX_ID_CHARS),
        (Name, limits.MAX_NAME_CHARS),
        (MemoryKey, limits.MAX_KEY_CHARS),
        (MemoryValue, limits.MAX_VALUE_CHARS),
    ],
)
def test_lengths_come_from_the_limits_module(kind: Any, limit: int) -> None:
    adapter: TypeAdapter[str] = TypeAdapter(kind)
    assert adapter.validate_python("é" * limit) == "é" * limit
    with pytest.raises(ValidationError):
        adapter.validate_python("é" * (limit + 1))
    assert adapter.json_schema()["maxLength"] == limit


def test_integers_take_json_numbers_without_a_fraction() -> None:
    adapter: TypeAdapter[int] = TypeAdapter(EpochMs)
    assert adapter.validate_python(5.0, strict=True) == 5
    for bad in (5.5, "5", True):
        with pytest.raises(ValidationError):
            adapter.validate_python(bad, strict=True)
    assert adapter.json_schema() == {
        "type": "integer",
        "minimum": 0,
        "maximum": limits.MAX_EPOCH_MS,
    }


def test_free_form_json_follows_the_text_rule_in_keys_and_values() -> None:
    adapter: TypeAdapter[Any] = TypeAdapter(CleanJson)
    assert adapter.validate_python({"a": ["\u202e", {"b": 1}]}) == {"a": ["\u202e", {"b": 1}]}
    for bad in ({"a": ["\x00"]}, {"\x00": 1}, [[["\ud800"]]]):
        with pytest.raises(ValidationError):
            adapter.validate_python(bad)
    big = "x" * limits.MAX_TOOL_RESULT_BYTES
    with pytest.raises(ValidationError):
        TypeAdapter(ToolResultJson).validate_python(big)
    assert TypeAdapter(ToolResultJson).validate_python(big[:-2]) == big[:-2]  # the quotes count


_NAME_RX = re.compile(NAME_PATTERN)
_TEXT_RX = re.compile(TEXT_PATTERN)
_ALPHABET = st.sampled_from(
    ["a", "Z", " ", "é", "\U0001f600", "-", ":", *(c for c in REFUSED_IN_NAMES if c != "\ud800")]
)


@settings(max_examples=300, deadline=None)
@given(st.text(alphabet=_ALPHABET, max_size=8))
def test_the_json_schema_patterns_state_the_validators(value: str) -> None:
    """What the OpenAPI ``pattern`` admits, the server accepts unchanged, and the other way
    round (the server also trims surrounding whitespace, which the pattern does not admit)."""
    try:
        accepted = IDENTIFIER.validate_python(value)
    except ValidationError:
        accepted = None
    if _NAME_RX.fullmatch(value):
        assert accepted == value
    if accepted is not None:
        assert _NAME_RX.fullmatch(accepted)
    assert bool(_TEXT_RX.fullmatch(value)) == ("\x00" not in value)


def test_the_patterns_are_regexes_of_json_schema_validators() -> None:
    """jsonschema-rs (what schemathesis checks documents with) reads them as the server does;
    unpaired surrogates, which its engine cannot state, are refused by the server alone."""
    import jsonschema_rs

    names = jsonschema_rs.validator_for({"type": "string", "pattern": NAME_PATTERN})
    texts = jsonschema_rs.validator_for({"type": "string", "pattern": TEXT_PATTERN})
    for char in REFUSED_IN_NAMES:
        if char != "\ud800":
            assert not names.is_valid(f"a{char}b"), repr(char)
    assert names.is_valid("Zoë 😀 a:b")
    assert texts.is_valid("a\u202e\x1bb")
    assert not texts.is_valid("a\x00b")


def test_patterns_are_plain_json_strings() -> None:
    json.dumps({"p": NAME_PATTERN, "t": TEXT_PATTERN}, ensure_ascii=True)  # \\u escapes only
    assert "\\u202e" in NAME_PATTERN
