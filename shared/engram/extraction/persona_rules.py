"""The persona-level rules, used only when persona scope is enabled: an assistant's
statement of policy, and a user's how-to question (recorded in the third person)."""

from __future__ import annotations

import re

from engram.extraction.clauses import Candidate, anchored, bounded, clean_value, words_of
from engram.extraction.sanitize import normalise_key


@anchored(
    r"^(?:per\s+|according\s+to\s+)?(?:our|the)\s+(?P<t>[\w' -]{0,30}?)\s*polic(?:y|ies)\s*"
    r"(?:is|are|states|says|:)?\s*(?:that\s+)?,?\s*(?P<v>.+)$"
)
def rule_policy(m: re.Match[str]) -> Candidate | None:
    value = clean_value(m.group("v"), cut=False)
    if len(words_of(value)) < 2:
        return None
    topic = normalise_key(m.group("t"))
    key = f"{topic} policy" if topic else "policy " + " ".join(words_of(value)[:4])
    return Candidate(key, value, 0.6)


@anchored(
    r"^(?:how\s+(?:do|can|should|would)\s+i|how\s+to|where\s+(?:do|can)\s+i|can\s+i|"
    r"what\s+is\s+the\s+(?:best\s+)?way\s+to|is\s+it\s+possible\s+to)\s+(?P<x>.+?)\??$"
)
def rule_faq(m: re.Match[str]) -> Candidate | None:
    what = bounded(m.group("x"), 15, cut=False)
    if not what:
        return None
    what = _THIRD_PERSON.sub(lambda w: _PRONOUNS[w.group(0).lower()], what)
    return Candidate(
        "common question " + " ".join(words_of(what)[:4]), f"Users ask how to {what}", 0.4
    )


_PRONOUNS = {"my": "their", "i": "they", "me": "them", "mine": "theirs", "myself": "themselves"}
_THIRD_PERSON = re.compile(r"\b(?:my|i|me|mine|myself)\b", re.IGNORECASE)
