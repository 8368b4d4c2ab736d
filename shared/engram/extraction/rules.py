"""A deterministic, rule-based extractor: the local default (no model, no network).

It reads USER messages only (plus, when persona scope is enabled, assistant statements of
policy and users' how-to questions) and recognises a fixed set of first-person statements.
Every rule is anchored at the start of a clause, so reported speech ("he said I live in …")
does not match. See ``docs/extraction.md`` for the table of patterns, keys and confidences.

Skipped on purpose:

* questions (a sentence ending in "?" or opening with an interrogative) — except a polite
  "can you remember that …?" request;
* hypotheticals and hedges ("if", "suppose", "imagine", "what if", "maybe", "might", "wish", …);
* negated values ("my name is not …") and desires ("I would love to …");
* anything whose key or value looks like an instruction to the assistant
  (:func:`engram.extraction.sanitize.looks_like_instruction`);
* secrets: passwords, PINs, API keys, tokens, card/account numbers
  (:func:`engram.extraction.sanitize.looks_secret`).

Within one transcript the last statement of a key wins.
"""

from __future__ import annotations

import re
from collections.abc import Callable, Iterator
from dataclasses import dataclass

from pydantic import ValidationError

from engram.extraction.models import (
    ExtractionResult,
    Proposal,
    ProposalScope,
    TranscriptJob,
)
from engram.extraction.sanitize import (
    bound,
    looks_like_instruction,
    looks_secret,
    normalise_key,
    sanitise_value,
)

EXTRACTOR_NAME = "rules"
DEFAULT_MAX_VALUE_CHARS = 500

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
_HYPOTHETICAL = re.compile(
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


def _clean_value(raw: str, *, cut: bool = True) -> str:
    value = raw.strip()
    if cut:
        value = _VALUE_CUT.sub("", value)
    value = value.strip(_TRAILING).lstrip(_LEADING)
    value = _TRAILING_WORDS.sub("", value).strip(_TRAILING)
    return sanitise_value(value)


def _words(text: str) -> list[str]:
    return text.split()


@dataclass(frozen=True)
class _Candidate:
    key: str
    value: str
    confidence: float


# ----------------------------------------------------------------------------------------------
# personal rules (user messages)

_NAME = re.compile(
    r"^(?:(?:please\s+)?(?:you\s+can\s+)?call\s+me|my\s+name\s+is|my\s+name's)\s+(?P<v>.+)$", _I
)
_NAME_NOT_FIRST = frozenset(
    [
        "not",
        "a",
        "an",
        "the",
        "when",
        "if",
        "back",
        "later",
        "tomorrow",
        "today",
        "tonight",
        "at",
        "on",
        "in",
        "after",
        "before",
        "now",
        "again",
        "sometime",
        "anytime",
        "maybe",
        "whenever",
        "once",
        "asap",
        "up",
        "out",
        "by",
        "with",
        "about",
        "any",
        "whatever",
        "what",
    ]
)
_NAME_STOP = re.compile(r"\b(?:please|and|but|from|instead|thanks|thank)\b.*$", _I)


def _rule_name(clause: str) -> _Candidate | None:
    m = _NAME.match(clause)
    if not m:
        return None
    raw = _NAME_STOP.sub("", m.group("v"))
    value = _clean_value(raw)
    words = _words(value)
    if not words or len(words) > 3 or words[0].lower() in _NAME_NOT_FIRST:
        return None
    if not any(ch.isalpha() for ch in value):
        return None
    return _Candidate("name", value, 0.9)


_PREFER = re.compile(
    r"^i(?:'d|\s+would)?\s+(?:really\s+|much\s+|strongly\s+|generally\s+|usually\s+|always\s+)?"
    r"prefer\s+(?P<x>.+)$",
    _I,
)
_PREFER_OVER = re.compile(r"^(?P<a>.+?)\s+(?:over|to|rather\s+than|instead\s+of)\s+(?P<b>.+)$", _I)
_PREFER_AS = re.compile(r"^(?P<a>.+?)\s+as\s+(?:my|the|our)\s+(?P<t>.+)$", _I)
_PREFER_FOR = re.compile(r"^(?P<a>.+?)\s+for\s+(?P<t>.+)$", _I)


def _rule_prefer(clause: str) -> _Candidate | None:
    m = _PREFER.match(clause)
    if not m:
        return None
    x = m.group("x")
    if (o := _PREFER_OVER.match(x)) and not x.lower().startswith(("to ", "not ")):
        a, b = _clean_value(o.group("a")), _clean_value(o.group("b"))
        if a and b and len(_words(a)) <= 3 and len(_words(b)) <= 3:
            first, second = sorted((normalise_key(a), normalise_key(b)))
            return _Candidate(f"{first} vs {second}", f"Prefers {a} over {b}", 0.75)
    if o := _PREFER_AS.match(x):
        a, t = _clean_value(o.group("a")), _clean_value(o.group("t"))
        if a and t and len(_words(t)) <= 4:
            return _Candidate(f"preferred {t}", a, 0.75)
    if o := _PREFER_FOR.match(x):
        a, t = _clean_value(o.group("a")), _clean_value(o.group("t"))
        if a and t and len(_words(t)) <= 4:
            return _Candidate(f"preference for {t}", a, 0.75)
    thing = _clean_value(x)
    lowered = thing.lower()
    if not thing or (lowered.startswith("not ") and not lowered.startswith("not to ")):
        return None
    topic = re.sub(r"^(?:not\s+)?to\s+", "", thing, flags=_I)
    return _Candidate(f"preference {' '.join(_words(topic)[:5])}", f"Prefers {thing}", 0.7)


_OPINION_VERBS = {
    "like": "Likes",
    "love": "Loves",
    "adore": "Loves",
    "enjoy": "Enjoys",
    "hate": "Hates",
    "dislike": "Dislikes",
    "detest": "Hates",
    "can't stand": "Can't stand",
    "cannot stand": "Can't stand",
    "don't like": "Dislikes",
    "do not like": "Dislikes",
    "really like": "Likes",
}
_OPINION = re.compile(
    r"^i\s+(?:really\s+|absolutely\s+|just\s+|totally\s+)?"
    r"(?P<verb>like|love|adore|enjoy|hate|dislike|detest|can't\s+stand|cannot\s+stand|"
    r"don't\s+like|do\s+not\s+like)\s+(?P<x>.+)$",
    _I,
)
_OPINION_STOP = {
    "it",
    "that",
    "this",
    "when",
    "how",
    "you",
    "to",
    "what",
    "being",
    "the way",
    "if",
    "your",
    "them",
    "him",
    "her",
    "it's",
    "that's",
}


def _rule_opinion(clause: str) -> _Candidate | None:
    m = _OPINION.match(clause)
    if not m:
        return None
    thing = _clean_value(m.group("x"))
    words = _words(thing)
    if not words or len(words) > 6 or words[0].lower() in _OPINION_STOP:
        return None
    verb = _OPINION_VERBS[" ".join(m.group("verb").lower().split())]
    return _Candidate(f"opinion on {thing}", f"{verb} {thing}", 0.6)


_ALLERGY = re.compile(
    r"^(?:i'm|i\s+am|im)\s+(?:very\s+|severely\s+|really\s+|deathly\s+)?allergic\s+to\s+"
    r"(?P<x>.+)$",
    _I,
)


def _rule_allergy(clause: str) -> _Candidate | None:
    m = _ALLERGY.match(clause)
    if not m:
        return None
    thing = _clean_value(m.group("x"))
    if not thing or len(_words(thing)) > 6:
        return None
    return _Candidate(f"allergy {thing}", f"Allergic to {thing}", 0.9)


_DIET = re.compile(
    r"^(?:i'm|i\s+am|im)\s+(?:an?\s+)?(?:strict\s+|full\s+)?(?P<x>vegetarian|vegan|"
    r"pescatarian|pescetarian|kosher|halal|gluten[- ]free|lactose[- ]intolerant|celiac|"
    r"coeliac|diabetic)\b",
    _I,
)


def _rule_diet(clause: str) -> _Candidate | None:
    m = _DIET.match(clause)
    if not m:
        return None
    return _Candidate("diet", m.group("x").lower(), 0.85)


_WORK = re.compile(
    r"^i\s+(?:currently\s+|now\s+|still\s+)?work\s+(?P<prep>at|for|on|as|in)\s+(?P<x>.+)$", _I
)
_EMPLOYER_CUT = re.compile(r"\s+(?:on|as|in|with|where|doing|since)\s.*$", _I)
_WORK_KEYS = {
    "at": "employer",
    "for": "employer",
    "on": "current work",
    "as": "job title",
    "in": "industry",
}


def _rule_work(clause: str) -> _Candidate | None:
    m = _WORK.match(clause)
    if not m:
        return None
    value = _clean_value(m.group("x"))
    prep = m.group("prep").lower()
    if prep == "as":
        value = re.sub(r"^(?:an?|the)\s+", "", value, flags=_I)
    if prep in ("at", "for"):
        value = _EMPLOYER_CUT.sub("", value)
    if not value or len(_words(value)) > 10:
        return None
    return _Candidate(_WORK_KEYS[prep], value, 0.8)


_LIVE = re.compile(
    r"^(?:i\s+(?:currently\s+|now\s+|still\s+)?(?:live|reside)\s+in|"
    r"(?:i'm|i\s+am|im)\s+(?:currently\s+|now\s+)?(?:based|located|living)\s+in)\s+(?P<x>.+)$",
    _I,
)


def _rule_live(clause: str) -> _Candidate | None:
    m = _LIVE.match(clause)
    if not m:
        return None
    value = _clean_value(m.group("x"))
    if not value or len(_words(value)) > 8:
        return None
    return _Candidate("location", value, 0.8)


_USE_FOR = re.compile(
    r"^i\s+(?:usually\s+|always\s+|mostly\s+|mainly\s+|generally\s+|normally\s+)?use\s+"
    r"(?P<x>.+?)\s+for\s+(?P<t>.+)$",
    _I,
)


def _rule_use_for(clause: str) -> _Candidate | None:
    m = _USE_FOR.match(clause)
    if not m:
        return None
    tool = _clean_value(m.group("x"))
    task = _clean_value(re.sub(r"\s+and\s.*$", "", m.group("t"), flags=_I))
    if not tool or not task or len(_words(tool)) > 5 or len(_words(task)) > 4:
        return None
    return _Candidate(f"tool for {task}", tool, 0.7)


_ALWAYS = re.compile(r"^(?:please\s+)?(?P<m>always|never)\s+(?P<x>.+)$", _I)


def _rule_always(clause: str) -> _Candidate | None:
    m = _ALWAYS.match(clause)
    if not m:
        return None
    mode = m.group("m").lower()
    what = _clean_value(m.group("x"), cut=False)
    if not what or what.lower().startswith("mind") or len(_words(what)) > 25:
        return None
    return _Candidate(f"{mode} {what}", f"Wants the assistant to {mode} {what}", 0.8)


_MY_IS = re.compile(
    r"^my\s+(?P<t>[^\W\d][\w' -]*?)\s+(?:is|are|'s)\s+(?P<called>(?:called|named)\s+)?(?P<v>.+)$",
    _I,
)
_MY_STOP = {
    "question",
    "problem",
    "issue",
    "point",
    "guess",
    "bad",
    "fault",
    "pleasure",
    "concern",
    "worry",
    "answer",
    "request",
    "suggestion",
    "turn",
    "mistake",
    "understanding",
    "thought",
    "thoughts",
    "idea",
    "feeling",
    "opinion",
    "bet",
    "hope",
    "apologies",
    "apology",
    "excuse",
    "take",
    "reply",
    "response",
    "message",
    "prompt",
    "instructions",
    "instruction",
    "task",
    "favourite",
    "favorite",
    "preferred",
}
_EVALUATIVE = frozenset(
    [
        "nightmare",
        "mess",
        "pain",
        "joke",
        "hell",
        "great",
        "awesome",
        "terrible",
        "awful",
        "boring",
        "fine",
        "ok",
        "okay",
        "good",
        "bad",
        "stressful",
        "crazy",
        "busy",
        "hard",
        "tough",
        "amazing",
        "horrible",
        "weird",
        "broken",
        "down",
    ]
)
_MY_ALIASES = {
    "company": "employer",
    "employer": "employer",
    "job": "job title",
    "job title": "job title",
    "title": "job title",
    "role": "job title",
    "position": "job title",
    "occupation": "job title",
    "profession": "job title",
    "city": "location",
    "home town": "location",
    "hometown": "location",
    "home": "location",
    "location": "location",
    "time zone": "timezone",
    "timezone": "timezone",
    "pronouns": "pronouns",
}


def _rule_my_is(clause: str) -> _Candidate | None:
    m = _MY_IS.match(clause)
    if not m:
        return None
    topic = normalise_key(m.group("t"))
    words = topic.split()
    if not words or len(words) > 4 or words[-1] in _MY_STOP or words[0] in ("own", "only"):
        return None
    value = _clean_value(m.group("v"))
    if not value or value.lower().startswith(("not ", "a bit", "that ", "to ")):
        return None
    if re.sub(r"^(?:an?|the|so|very|really|such\s+an?)\s+", "", value.lower()) in _EVALUATIVE:
        return None
    if words[0] in ("favourite", "favorite", "preferred"):
        topic = " ".join(["preferred", *words[1:]])
    topic = _MY_ALIASES.get(topic, topic)
    if m.group("called"):
        topic = f"{topic} name"
    return _Candidate(topic, value, 0.8)


_PERSONAL_RULES: tuple[Callable[[str], _Candidate | None], ...] = (
    _rule_name,
    _rule_allergy,
    _rule_diet,
    _rule_prefer,
    _rule_work,
    _rule_live,
    _rule_use_for,
    _rule_opinion,
    _rule_always,
    _rule_my_is,
)

_REMEMBER = re.compile(
    r"^(?:please\s+)?(?:(?:can|could|would|will)\s+you\s+(?:please\s+)?)?"
    r"(?:remember|note|keep\s+in\s+mind|don't\s+forget)\s+(?:that\s+)?(?P<x>.+)$",
    _I,
)
_REMEMBER_NOISE = re.compile(r"^(?:to|this|it|me|that|what|how|when|where|why|who)\b", _I)
_SUBJECT = re.compile(
    r"^(?:the|our|my|a|an)?\s*(?P<s>[^\W\d][\w' -]{0,40}?)\s+(?:is|are|will\s+be|was|has)\s+\S", _I
)


def _rule_remember(clause: str) -> _Candidate | None:
    m = _REMEMBER.match(clause)
    if not m:
        return None
    inner = _strip_fillers(m.group("x").strip().rstrip("?"))
    if not inner or _REMEMBER_NOISE.match(inner):
        return None
    for rule in _PERSONAL_RULES:
        found = rule(inner)
        if found is not None:
            return _Candidate(found.key, found.value, max(found.confidence, 0.85))
    value = _clean_value(inner, cut=False)
    if not value:
        return None
    subject = _SUBJECT.match(value)
    if subject and len(subject.group("s").split()) <= 4:
        key = subject.group("s")
    else:
        key = "note " + " ".join(_words(value)[:5])
    return _Candidate(key, value, 0.85)


# ----------------------------------------------------------------------------------------------
# persona-level rules (only when persona scope is enabled)

_POLICY = re.compile(
    r"^(?:per\s+|according\s+to\s+)?(?:our|the)\s+(?P<t>[\w' -]{0,30}?)\s*polic(?:y|ies)\s*"
    r"(?:is|are|states|says|:)?\s*(?:that\s+)?,?\s*(?P<v>.+)$",
    _I,
)


def _rule_policy(clause: str) -> _Candidate | None:
    m = _POLICY.match(clause)
    if not m:
        return None
    value = _clean_value(m.group("v"), cut=False)
    if not value or len(_words(value)) < 2:
        return None
    topic = normalise_key(m.group("t"))
    key = f"{topic} policy" if topic else "policy " + " ".join(_words(value)[:4])
    return _Candidate(key, value, 0.6)


_HOW_TO = re.compile(
    r"^(?:how\s+(?:do|can|should|would)\s+i|how\s+to|where\s+(?:do|can)\s+i|can\s+i|"
    r"what\s+is\s+the\s+(?:best\s+)?way\s+to|is\s+it\s+possible\s+to)\s+(?P<x>.+?)\??$",
    _I,
)


def _rule_faq(clause: str) -> _Candidate | None:
    m = _HOW_TO.match(clause)
    if not m:
        return None
    what = _clean_value(m.group("x"), cut=False)
    if not what or len(_words(what)) > 15:
        return None
    what = _THIRD_PERSON.sub(lambda w: _PRONOUNS[w.group(0).lower()], what)
    return _Candidate(
        "common question " + " ".join(_words(what)[:4]), f"Users ask how to {what}", 0.4
    )


_PRONOUNS = {"my": "their", "i": "they", "me": "them", "mine": "theirs", "myself": "themselves"}
_THIRD_PERSON = re.compile(r"\b(?:my|i|me|mine|myself)\b", _I)


# ----------------------------------------------------------------------------------------------


def _strip_fillers(text: str) -> str:
    previous = None
    text = text.strip()
    while previous != text:
        previous = text
        text = _FILLER.sub("", text, count=1).strip()
    return text


@dataclass(frozen=True)
class _Sentence:
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


def _sentences(content: str) -> Iterator[_Sentence]:
    text = content.replace("\u2019", "'").replace("\u2018", "'")
    for raw in _split_sentences(text):
        sentence = raw.strip()
        if not sentence:
            continue
        stripped = _strip_fillers(sentence)
        question = sentence.endswith("?") or bool(_INTERROGATIVE.match(stripped))
        clauses = tuple(
            c for c in (_strip_fillers(part) for part in _CLAUSE_JOIN.split(sentence)) if c
        )
        yield _Sentence(clauses, question)


class RuleBasedExtractor:
    """Deterministic extraction from first-person statements. Thread-safe, stateless."""

    name = EXTRACTOR_NAME

    def __init__(self, *, max_value_chars: int = DEFAULT_MAX_VALUE_CHARS) -> None:
        if not 1 <= max_value_chars <= 2000:
            raise ValueError("max_value_chars must be within 1..2000")
        self._max_value_chars = max_value_chars

    def extract(
        self, job: TranscriptJob, *, persona_prompt: str | None, persona_scope: bool
    ) -> ExtractionResult:
        del persona_prompt  # rules do not read prompts
        personal = ProposalScope.PERSONA_USER if job.persona_id else ProposalScope.USER
        learn_persona = persona_scope and job.persona_id is not None
        found: dict[tuple[ProposalScope, str], Proposal] = {}

        def add(candidate: _Candidate | None, scope: ProposalScope) -> None:
            if candidate is None:
                return
            proposal = self._proposal(candidate, scope, job.conversation_id)
            if proposal is None:
                return
            slot = (proposal.scope, proposal.key)
            found.pop(slot, None)  # last statement wins, and keeps its place in time
            found[slot] = proposal

        for message in job.messages:
            if message.role == "user":
                for sentence in _sentences(message.content):
                    for clause in sentence.clauses:
                        remembered = _rule_remember(clause)
                        if remembered is not None:
                            if not _HYPOTHETICAL.search(clause):
                                add(remembered, personal)
                            continue
                        if sentence.question:
                            if learn_persona:
                                add(_rule_faq(clause), ProposalScope.PERSONA)
                            continue
                        if _HYPOTHETICAL.search(clause):
                            continue
                        add(_first_match(clause), personal)
            elif message.role == "assistant" and learn_persona:
                for sentence in _sentences(message.content):
                    if sentence.question:
                        continue
                    for clause in sentence.clauses:
                        if not _HYPOTHETICAL.search(clause):
                            add(_rule_policy(clause), ProposalScope.PERSONA)
        return ExtractionResult(proposals=list(found.values()), usage=None, extractor=self.name)

    def _proposal(
        self, candidate: _Candidate, scope: ProposalScope, conversation_id: str
    ) -> Proposal | None:
        value = bound(sanitise_value(candidate.value), self._max_value_chars)
        if looks_like_instruction(candidate.key) or looks_like_instruction(value):
            return None
        if looks_secret(candidate.key, value):
            return None
        try:
            return Proposal(
                key=candidate.key,
                value=value,
                confidence=candidate.confidence,
                scope=scope,
                source_channel_id=conversation_id,
            )
        except ValidationError:
            return None


def _first_match(clause: str) -> _Candidate | None:
    for rule in _PERSONAL_RULES:
        found = rule(clause)
        if found is not None:
            return found
    return None
