"""The personal rules: first-person statements of a user (name, preferences, opinions,
allergies, diet, work, home, tools, standing instructions, "my X is Y", "remember that …"),
each anchored at the start of a clause. The first rule that matches a clause wins."""

from __future__ import annotations

import re

from engram.extraction.clauses import (
    Candidate,
    Rule,
    anchored,
    bounded,
    clean_value,
    strip_fillers,
    words_of,
)
from engram.extraction.sanitize import normalise_key

_I = re.IGNORECASE

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


@anchored(r"^(?:(?:please\s+)?(?:you\s+can\s+)?call\s+me|my\s+name\s+is|my\s+name's)\s+(?P<v>.+)$")
def _rule_name(m: re.Match[str]) -> Candidate | None:
    value = clean_value(_NAME_STOP.sub("", m.group("v")))
    words = words_of(value)
    if not words or len(words) > 3 or words[0].lower() in _NAME_NOT_FIRST:
        return None
    if not any(ch.isalpha() for ch in value):
        return None
    return Candidate("name", value, 0.9)


_PREFER_OVER = re.compile(r"^(?P<a>.+?)\s+(?:over|to|rather\s+than|instead\s+of)\s+(?P<b>.+)$", _I)
_PREFER_AS = re.compile(r"^(?P<a>.+?)\s+as\s+(?:my|the|our)\s+(?P<t>.+)$", _I)
_PREFER_FOR = re.compile(r"^(?P<a>.+?)\s+for\s+(?P<t>.+)$", _I)


@anchored(
    r"^i(?:'d|\s+would)?\s+(?:really\s+|much\s+|strongly\s+|generally\s+|usually\s+|always\s+)?"
    r"prefer\s+(?P<x>.+)$"
)
def _rule_prefer(m: re.Match[str]) -> Candidate | None:
    x = m.group("x")
    if (o := _PREFER_OVER.match(x)) and not x.lower().startswith(("to ", "not ")):
        a, b = bounded(o.group("a"), 3), bounded(o.group("b"), 3)
        if a and b:
            first, second = sorted((normalise_key(a), normalise_key(b)))
            return Candidate(f"{first} vs {second}", f"Prefers {a} over {b}", 0.75)
    for pattern, prefix in ((_PREFER_AS, "preferred"), (_PREFER_FOR, "preference for")):
        if o := pattern.match(x):
            a, t = clean_value(o.group("a")), bounded(o.group("t"), 4)
            if a and t:
                return Candidate(f"{prefix} {t}", a, 0.75)
    thing = clean_value(x)
    lowered = thing.lower()
    if not thing or (lowered.startswith("not ") and not lowered.startswith("not to ")):
        return None
    topic = re.sub(r"^(?:not\s+)?to\s+", "", thing, flags=_I)
    return Candidate(f"preference {' '.join(words_of(topic)[:5])}", f"Prefers {thing}", 0.7)


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


@anchored(
    r"^i\s+(?:really\s+|absolutely\s+|just\s+|totally\s+)?"
    r"(?P<verb>like|love|adore|enjoy|hate|dislike|detest|can't\s+stand|cannot\s+stand|"
    r"don't\s+like|do\s+not\s+like)\s+(?P<x>.+)$"
)
def _rule_opinion(m: re.Match[str]) -> Candidate | None:
    thing = clean_value(m.group("x"))
    words = words_of(thing)
    if not words or len(words) > 6 or words[0].lower() in _OPINION_STOP:
        return None
    verb = _OPINION_VERBS[" ".join(m.group("verb").lower().split())]
    return Candidate(f"opinion on {thing}", f"{verb} {thing}", 0.6)


@anchored(
    r"^(?:i'm|i\s+am|im)\s+(?:very\s+|severely\s+|really\s+|deathly\s+)?allergic\s+to\s+"
    r"(?P<x>.+)$"
)
def _rule_allergy(m: re.Match[str]) -> Candidate | None:
    thing = bounded(m.group("x"), 6)
    return Candidate(f"allergy {thing}", f"Allergic to {thing}", 0.9) if thing else None


@anchored(
    r"^(?:i'm|i\s+am|im)\s+(?:an?\s+)?(?:strict\s+|full\s+)?(?P<x>vegetarian|vegan|"
    r"pescatarian|pescetarian|kosher|halal|gluten[- ]free|lactose[- ]intolerant|celiac|"
    r"coeliac|diabetic)\b"
)
def _rule_diet(m: re.Match[str]) -> Candidate | None:
    return Candidate("diet", m.group("x").lower(), 0.85)


_EMPLOYER_CUT = re.compile(r"\s+(?:on|as|in|with|where|doing|since)\s.*$", _I)
_WORK_KEYS = {
    "at": "employer",
    "for": "employer",
    "on": "current work",
    "as": "job title",
    "in": "industry",
}


@anchored(r"^i\s+(?:currently\s+|now\s+|still\s+)?work\s+(?P<prep>at|for|on|as|in)\s+(?P<x>.+)$")
def _rule_work(m: re.Match[str]) -> Candidate | None:
    value = clean_value(m.group("x"))
    prep = m.group("prep").lower()
    if prep == "as":
        value = re.sub(r"^(?:an?|the)\s+", "", value, flags=_I)
    if prep in ("at", "for"):
        value = _EMPLOYER_CUT.sub("", value)
    if not value or len(words_of(value)) > 10:
        return None
    return Candidate(_WORK_KEYS[prep], value, 0.8)


@anchored(
    r"^(?:i\s+(?:currently\s+|now\s+|still\s+)?(?:live|reside)\s+in|"
    r"(?:i'm|i\s+am|im)\s+(?:currently\s+|now\s+)?(?:based|located|living)\s+in)\s+(?P<x>.+)$"
)
def _rule_live(m: re.Match[str]) -> Candidate | None:
    value = bounded(m.group("x"), 8)
    return Candidate("location", value, 0.8) if value else None


@anchored(
    r"^i\s+(?:usually\s+|always\s+|mostly\s+|mainly\s+|generally\s+|normally\s+)?use\s+"
    r"(?P<x>.+?)\s+for\s+(?P<t>.+)$"
)
def _rule_use_for(m: re.Match[str]) -> Candidate | None:
    tool = bounded(m.group("x"), 5)
    task = bounded(re.sub(r"\s+and\s.*$", "", m.group("t"), flags=_I), 4)
    if not tool or not task:
        return None
    return Candidate(f"tool for {task}", tool, 0.7)


@anchored(r"^(?:please\s+)?(?P<m>always|never)\s+(?P<x>.+)$")
def _rule_always(m: re.Match[str]) -> Candidate | None:
    mode = m.group("m").lower()
    what = bounded(m.group("x"), 25, cut=False)
    if not what or what.lower().startswith("mind"):
        return None
    return Candidate(f"{mode} {what}", f"Wants the assistant to {mode} {what}", 0.8)


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


@anchored(
    r"^my\s+(?P<t>[^\W\d][\w' -]*?)\s+(?:is|are|'s)\s+(?P<called>(?:called|named)\s+)?(?P<v>.+)$"
)
def _rule_my_is(m: re.Match[str]) -> Candidate | None:
    topic = normalise_key(m.group("t"))
    words = topic.split()
    if not words or len(words) > 4 or words[-1] in _MY_STOP or words[0] in ("own", "only"):
        return None
    value = clean_value(m.group("v"))
    if not value or value.lower().startswith(("not ", "a bit", "that ", "to ")):
        return None
    if re.sub(r"^(?:an?|the|so|very|really|such\s+an?)\s+", "", value.lower()) in _EVALUATIVE:
        return None
    if words[0] in ("favourite", "favorite", "preferred"):
        topic = " ".join(["preferred", *words[1:]])
    topic = _MY_ALIASES.get(topic, topic)
    if m.group("called"):
        topic = f"{topic} name"
    return Candidate(topic, value, 0.8)


PERSONAL_RULES: tuple[Rule, ...] = (
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

_REMEMBER_NOISE = re.compile(r"^(?:to|this|it|me|that|what|how|when|where|why|who)\b", _I)
_SUBJECT = re.compile(
    r"^(?:the|our|my|a|an)?\s*(?P<s>[^\W\d][\w' -]{0,40}?)\s+(?:is|are|will\s+be|was|has)\s+\S", _I
)


def first_match(clause: str) -> Candidate | None:
    for rule in PERSONAL_RULES:
        found = rule(clause)
        if found is not None:
            return found
    return None


@anchored(
    r"^(?:please\s+)?(?:(?:can|could|would|will)\s+you\s+(?:please\s+)?)?"
    r"(?:remember|note|keep\s+in\s+mind|don't\s+forget)\s+(?:that\s+)?(?P<x>.+)$"
)
def rule_remember(m: re.Match[str]) -> Candidate | None:
    inner = strip_fillers(m.group("x").strip().rstrip("?"))
    if not inner or _REMEMBER_NOISE.match(inner):
        return None
    found = first_match(inner)
    if found is not None:
        return Candidate(found.key, found.value, max(found.confidence, 0.85))
    value = clean_value(inner, cut=False)
    if not value:
        return None
    subject = _SUBJECT.match(value)
    if subject and len(subject.group("s").split()) <= 4:
        key = subject.group("s")
    else:
        key = "note " + " ".join(words_of(value)[:5])
    return Candidate(key, value, 0.85)
