"""One key, however it is spelled: the rule that decides which memory a key names.

A memory's identity within its team, scope, owner and user is the *canonical* form of its
key: Unicode NFKC, case folded, every run of whitespace, ``_`` and ``-`` one space, and the
punctuation and spaces around it dropped. ``favourite editor``, ``favourite_editor``,
``Favourite-Editor`` and ``ＦＡＶＯＵＲＩＴＥ EDITOR`` name one memory. The key as first
written is what the memory shows; a save under another spelling updates that memory.
"""

from __future__ import annotations

import re
import unicodedata

#: whitespace, underscores and hyphens (after NFKC, which maps their compatibility forms)
_SEPARATORS = re.compile(r"[\s_\-]+")


def _surrounding(ch: str) -> bool:
    """Punctuation or a space: what is dropped around a key."""
    return ch.isspace() or unicodedata.category(ch).startswith("P")


def canonical_key(key: str) -> str:
    """The form of ``key`` that decides a memory's identity (possibly empty: a key of
    punctuation only, which ``check_key`` refuses)."""
    folded = unicodedata.normalize("NFKC", unicodedata.normalize("NFKC", key).casefold())
    spaced = _SEPARATORS.sub(" ", folded)
    start, end = 0, len(spaced)
    while start < end and _surrounding(spaced[start]):
        start += 1
    while end > start and _surrounding(spaced[end - 1]):
        end -= 1
    return spaced[start:end]


def has_identity(key: str) -> bool:
    """Whether ``key`` names something: its canonical form is not empty."""
    return bool(canonical_key(key))


__all__ = ["canonical_key", "has_identity"]
