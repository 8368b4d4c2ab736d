"""The persona-level rules, used only when persona scope is enabled: an assistant's
statement of policy, and a user's how-to question (recorded in the third person)."""

from __future__ import annotations

import re

from engram.extraction.clauses import Candidate, clean_value, words_of
from engram.extraction.sanitize import normalise_key

_I = re.IGNORECASE

_POLICY = re.compile(
    r"^(?:per\s+|according\s+to\s+)?(?:our|the)\s+(?P<t>[\w' -]{0,30}?)\s*polic(?:y|ies)\s*"
    r"(?:is|are|states|says|:)?\s*(?:that\s+)?,?\s*(?P<v>.+)$",
    _I,
)


def rule_policy(clause: str) -> Candidate | None:
    m = _POLICY.match(clause)
    if not m:
        return None
    value = clean_value(m.group("v"), cut=False)
    if not value or len(words_of(value)) < 2:
        return None
    topic = normalise_key(m.group("t"))
    key = f"{topic} policy" if topic else "policy " + " ".join(words_of(value)[:4])
    return Candidate(key, value, 0.6)


_HOW_TO = re.compile(
    r"^(?:how\s+(?:do|can|should|would)\s+i|how\s+to|where\s+(?:do|can)\s+i|can\s+i|"
    r"what\s+is\s+the\s+(?:best\s+)?way\s+to|is\s+it\s+possible\s+to)\s+(?P<x>.+?)\??$",
    _I,
)


def rule_faq(clause: str) -> Candidate | None:
    m = _HOW_TO.match(clause)
    if not m:
        return None
    what = clean_value(m.group("x"), cut=False)
    if not what or len(words_of(what)) > 15:
        return None
    what = _THIRD_PERSON.sub(lambda w: _PRONOUNS[w.group(0).lower()], what)
    return Candidate(
        "common question " + " ".join(words_of(what)[:4]), f"Users ask how to {what}", 0.4
    )


_PRONOUNS = {"my": "their", "i": "they", "me": "them", "mine": "theirs", "myself": "themselves"}
_THIRD_PERSON = re.compile(r"\b(?:my|i|me|mine|myself)\b", _I)
