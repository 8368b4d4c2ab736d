"""Signed review cursors: only a cursor this service issued, for the same listing, opens."""

from __future__ import annotations

import re

import pytest

from engram.errors import InvalidInput
from engram.memories.cursors import CURSOR_PATTERN, CursorSigner

KEY = b"k" * 32
LISTING = ("review", "acme", "")


def test_a_signed_cursor_opens_to_the_store_cursor() -> None:
    signer = CursorSigner(KEY)
    token = signer.sign("c3RvcmUtY3Vyc29y", *LISTING)
    assert token is not None
    assert re.fullmatch(CURSOR_PATTERN, token)
    assert signer.open(token, *LISTING) == "c3RvcmUtY3Vyc29y"
    assert CursorSigner(KEY).open(token, *LISTING) == "c3RvcmUtY3Vyc29y"  # another process
    assert signer.sign(None, *LISTING) is None
    assert signer.open(None, *LISTING) is None


def test_every_flipped_byte_is_refused() -> None:
    signer = CursorSigner(KEY)
    token = signer.sign("c3RvcmUtY3Vyc29y", *LISTING)
    assert token is not None
    for i, char in enumerate(token):
        flipped = token[:i] + ("A" if char != "A" else "B") + token[i + 1 :]
        with pytest.raises(InvalidInput) as err:
            signer.open(flipped, *LISTING)
        assert err.value.field == "cursor"


@pytest.mark.parametrize(
    "other",
    [("review", "globex", ""), ("review", "acme", "chef"), ("export", "acme", "")],
)
def test_a_cursor_of_another_listing_is_refused(other: tuple[str, ...]) -> None:
    signer = CursorSigner(KEY)
    token = signer.sign("c3RvcmUtY3Vyc29y", *LISTING)
    with pytest.raises(InvalidInput):
        signer.open(token, *other)


@pytest.mark.parametrize("token", ["", ".", "abc", "abc.", ".abc", "a.b.c", "é.é"])
def test_malformed_cursors_are_refused(token: str) -> None:
    with pytest.raises(InvalidInput):
        CursorSigner(KEY).open(token, *LISTING)


def test_another_key_does_not_open_it_and_short_keys_are_refused() -> None:
    token = CursorSigner(KEY).sign("abc", *LISTING)
    with pytest.raises(InvalidInput):
        CursorSigner(b"x" * 32).open(token, *LISTING)
    with pytest.raises(ValueError, match="16 bytes"):
        CursorSigner(b"short")
