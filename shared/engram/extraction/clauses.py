"""How the rule-based extractor reads a message: sentences split on punctuation (not after
an abbreviation), clauses split on joining words, leading fillers dropped, questions and
hypotheticals recognised, and a captured value trimmed of trailing reasons and asides."""

from __future__ import annotations

import functools
import re
from collections.abc import Callable, Iterator
from dataclasses import dataclass

from engram.extraction.sanitize import sanitise_value

_I = re.IGNORECASE

_SENTENCES = re.compile(r"(?<=[.!?])\s+|[\n;]+")
_CLAUSE_JOIN = re.compile(
    r",?\s+(?:and|but|also|plus|while)\s+(?=(?:i|i'm|im|my|please|call\s+me|remember)\b)|,\s+"
    r"(?=(?:i|i'm|my)\s)",
    _I,
)
_FILLER = re.compile(
    r"^(?:also|and|but|so|oh|well|actually|btw|fyi|ok|okay|yes|yeah|hi|hello|hey|anyway|now|"
    r"by\s+the\s+way|just\s+so\s+you\s+know|for\s+the\s+record|for\s+context|in\s+fact|"
    r"honestly|just\s+fyi)\b[,!:.]?\s*",
    _I,
)
_INTERROGATIVE = re.compile(
    r"^(?:what|why|how|when|where|who|whom|whose|which|do|does|did|can|could|would|should|"
    r"is|are|was|were|will|shall|may|am|have|has|isn't|aren't|don't|doesn't|didn't)\b",
    _I,
)
HYPOTHETICAL = re.compile(
    r"\b(?:if|suppose|supposing|imagine|imagining|hypothetically|pretend|pretending|assuming|"
    r"assume|wish|unless|in\s+theory|let'?s\s+say|what\s+if|maybe|perhaps|might|"
    r"would\s+be|were\s+i|i'?d\s+(?:love|like|hate)\s+to|would\s+(?:love|like|hate)\s+to)\b",
    _I,
)
_VALUE_CUT = re.compile(
    r"\s+(?:because|since|so\s+that|as\s+well\s+as|which|though|although)\b.*$|[,(].*$", _I
)
_TRAILING_WORDS = re.compile(
    r"(?:\s+(?:now|currently|these\s+days|nowadays|at\s+the\s+moment|right\s+now|too|"
    r"as\s+well|also|though|lol|haha|thanks|thank\s+you))+$",
    _I,
)
_ABBREVIATION = re.compile(
    r"(?:^|\s)(?:mr|mrs|ms|dr|prof|st|sr|jr|mt|vs|etc|e\.g|i\.e|inc|ltd|co|no)\.$", _I
)
_TRAILING = " \t.,;:!?\"'`)]"
_LEADING = " \t\"'`(["


def clean_value(raw: str, *, cut: bool = True) -> str:
    value = raw.strip()
    if cut:
        value = _VALUE_CUT.sub("", value)
    value = value.strip(_TRAILING).lstrip(_LEADING)
    value = _TRAILING_WORDS.sub("", value).strip(_TRAILING)
    return sanitise_value(value)


def words_of(text: str) -> list[str]:
    return text.split()


def bounded(raw: str, most_words: int, *, cut: bool = True) -> str:
    """The cleaned value when it is not empty and has at most ``most_words`` words, else ""."""
    value = clean_value(raw, cut=cut)
    return value if value and len(words_of(value)) <= most_words else ""


@dataclass(frozen=True)
class Candidate:
    key: str
    value: str
    confidence: float


Rule = Callable[[str], Candidate | None]


def anchored(pattern: str) -> Callable[[Callable[[re.Match[str]], Candidate | None]], Rule]:
    """A rule from a pattern matched (ignoring case) at the start of a clause and a reading of
    its match: a clause the pattern does not match yields no candidate."""
    compiled = re.compile(pattern, _I)

    def decorate(read: Callable[[re.Match[str]], Candidate | None]) -> Rule:
        @functools.wraps(read)
        def rule(clause: str) -> Candidate | None:
            m = compiled.match(clause)
            return read(m) if m else None

        return rule

    return decorate


def strip_fillers(text: str) -> str:
    previous = None
    text = text.strip()
    while previous != text:
        previous = text
        text = _FILLER.sub("", text, count=1).strip()
    return text


@dataclass(frozen=True)
class Sentence:
    clauses: tuple[str, ...]
    question: bool


def _split_sentences(text: str) -> list[str]:
    pieces: list[str] = []
    for raw in _SENTENCES.split(text):
        if pieces and _ABBREVIATION.search(pieces[-1]) and raw.strip():
            pieces[-1] = f"{pieces[-1]} {raw}"
        else:
            pieces.append(raw)
    return pieces


def sentences(content: str) -> Iterator[Sentence]:
    text = content.replace("\u2019", "'").replace("\u2018", "'")
    for raw in _split_sentences(text):
        sentence = raw.strip()
        if not sentence:
            continue
        stripped = strip_fillers(sentence)
        question = sentence.endswith("?") or bool(_INTERROGATIVE.match(stripped))
        clauses = tuple(
            c for c in (strip_fillers(part) for part in _CLAUSE_JOIN.split(sentence)) if c
        )
        yield Sentence(clauses, question)
