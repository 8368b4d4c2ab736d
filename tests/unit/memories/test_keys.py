"""The one rule that decides a memory's identity from its key."""

from __future__ import annotations

import pytest
from pydantic import TypeAdapter, ValidationError

from engram.fields import MemoryKey
from engram.memories.keys import canonical_key


@pytest.mark.parametrize(
    "spelling",
    [
        "favourite editor",
        "favourite_editor",
        "Favourite-Editor",
        "ＦＡＶＯＵＲＩＴＥ EDITOR",  # full-width: NFKC
        "  favourite   editor  ",
        "favourite__-editor",
        "«favourite editor»",  # surrounding punctuation
        "Favourite\u00a0Editor",  # a no-break space
        "favourite_editor!",
    ],
)
def test_spellings_of_one_key_have_one_identity(spelling: str) -> None:
    assert canonical_key(spelling) == "favourite editor"


def test_case_folding_is_unicode_not_ascii() -> None:
    assert canonical_key("Straße") == canonical_key("STRASSE") == "strasse"
    assert canonical_key("ΣΊΣΥΦΟΣ") == canonical_key("σίσυφος")


def test_inner_punctuation_and_other_words_stay_apart() -> None:
    assert canonical_key("C++ version") != canonical_key("C version")
    assert canonical_key("e-mail") == canonical_key("e mail")
    assert canonical_key("favourite editor") != canonical_key("favourite editors")


def test_the_rule_is_idempotent() -> None:
    for key in ("Favourite-Editor", "ＦＡＶＯＵＲＩＴＥ EDITOR", "Straße", "«x»"):
        once = canonical_key(key)
        assert canonical_key(once) == once


def test_a_key_of_punctuation_only_names_nothing_and_is_refused() -> None:
    assert canonical_key("?!") == ""
    with pytest.raises(ValidationError) as refused:
        TypeAdapter(MemoryKey).validate_python("--")
    assert refused.value.errors()[0]["type"] == "key_identity"
    assert TypeAdapter(MemoryKey).validate_python("🙂") == "🙂"  # a symbol names something
