"""The personal rules: first-person statements of a user (name, preferences, opinions,
allergies, diet, work, home, tools, standing instructions, "my X is Y", "remember that …"),
each anchored at the start of a clause. The first rule that matches a clause wins."""

from __future__ import annotations

import re
from collections.abc import Callable

from engram.extraction.clauses import Candidate, clean_value, strip_fillers, words_of
from engram.extraction.sanitize import normalise_key

_I = re.IGNORECASE

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


def _rule_name(clause: str) -> Candidate | None:
    m = _NAME.match(clause)
    if not m:
        return None
    raw = _NAME_STOP.sub("", m.group("v"))
    value = clean_value(raw)
    words = words_of(value)
    if not words or len(words) > 3 or words[0].lower() in _NAME_NOT_FIRST:
        return None
    if not any(ch.isalpha() for ch in value):
        return None
    return Candidate("name", value, 0.9)


_PREFER = re.compile(
    r"^i(?:'d|\s+would)?\s+(?:really\s+|much\s+|strongly\s+|generally\s+|usually\s+|always\s+)?"
    r"prefer\s+(?P<x>.+)$",
    _I,
)
_PREFER_OVER = re.compile(r"^(?P<a>.+?)\s+(?:over|to|rather\s+than|instead\s+of)\s+(?P<b>.+)$", _I)
_PREFER_AS = re.compile(r"^(?P<a>.+?)\s+as\s+(?:my|the|our)\s+(?P<t>.+)$", _I)
_PREFER_FOR = re.compile(r"^(?P<a>.+?)\s+for\s+(?P<t>.+)$", _I)


def _rule_prefer(clause: str) -> Candidate | None:
    m = _PREFER.match(clause)
    if not m:
        return None
    x = m.group("x")
    if (o := _PREFER_OVER.match(x)) and not x.lower().startswith(("to ", "not ")):
        a, b = clean_value(o.group("a")), clean_value(o.group("b"))
        if a and b and len(words_of(a)) <= 3 and len(words_of(b)) <= 3:
            first, second = sorted((normalise_key(a), normalise_key(b)))
            return Candidate(f"{first} vs {second}", f"Prefers {a} over {b}", 0.75)
    if o := _PREFER_AS.match(x):
        a, t = clean_value(o.group("a")), clean_value(o.group("t"))
        if a and t and len(words_of(t)) <= 4:
            return Candidate(f"preferred {t}", a, 0.75)
    if o := _PREFER_FOR.match(x):
        a, t = clean_value(o.group("a")), clean_value(o.group("t"))
        if a and t and len(words_of(t)) <= 4:
            return Candidate(f"preference for {t}", a, 0.75)
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


def _rule_opinion(clause: str) -> Candidate | None:
    m = _OPINION.match(clause)
    if not m:
        return None
    thing = clean_value(m.group("x"))
    words = words_of(thing)
    if not words or len(words) > 6 or words[0].lower() in _OPINION_STOP:
        return None
    verb = _OPINION_VERBS[" ".join(m.group("verb").lower().split())]
    return Candidate(f"opinion on {thing}", f"{verb} {thing}", 0.6)


_ALLERGY = re.compile(
    r"^(?:i'm|i\s+am|im)\s+(?:very\s+|severely\s+|really\s+|deathly\s+)?allergic\s+to\s+"
    r"(?P<x>.+)$",
    _I,
)


def _rule_allergy(clause: str) -> Candidate | None:
    m = _ALLERGY.match(clause)
    if not m:
        return None
    thing = clean_value(m.group("x"))
    if not thing or len(words_of(thing)) > 6:
        return None
    return Candidate(f"allergy {thing}", f"Allergic to {thing}", 0.9)


_DIET = re.compile(
    r"^(?:i'm|i\s+am|im)\s+(?:an?\s+)?(?:strict\s+|full\s+)?(?P<x>vegetarian|vegan|"
    r"pescatarian|pescetarian|kosher|halal|gluten[- ]free|lactose[- ]intolerant|celiac|"
    r"coeliac|diabetic)\b",
    _I,
)


def _rule_diet(clause: str) -> Candidate | None:
    m = _DIET.match(clause)
    if not m:
        return None
    return Candidate("diet", m.group("x").lower(), 0.85)


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


def _rule_work(clause: str) -> Candidate | None:
    m = _WORK.match(clause)
    if not m:
        return None
    value = clean_value(m.group("x"))
    prep = m.group("prep").lower()
    if prep == "as":
        value = re.sub(r"^(?:an?|the)\s+", "", value, flags=_I)
    if prep in ("at", "for"):
        value = _EMPLOYER_CUT.sub("", value)
    if not value or len(words_of(value)) > 10:
        return None
    return Candidate(_WORK_KEYS[prep], value, 0.8)


_LIVE = re.compile(
    r"^(?:i\s+(?:currently\s+|now\s+|still\s+)?(?:live|reside)\s+in|"
    r"(?:i'm|i\s+am|im)\s+(?:currently\s+|now\s+)?(?:based|located|living)\s+in)\s+(?P<x>.+)$",
    _I,
)


def _rule_live(clause: str) -> Candidate | None:
    m = _LIVE.match(clause)
    if not m:
        return None
    value = clean_value(m.group("x"))
    if not value or len(words_of(value)) > 8:
        return None
    return Candidate("location", value, 0.8)


_USE_FOR = re.compile(
    r"^i\s+(?:usually\s+|always\s+|mostly\s+|mainly\s+|generally\s+|normally\s+)?use\s+"
    r"(?P<x>.+?)\s+for\s+(?P<t>.+)$",
    _I,
)


def _rule_use_for(clause: str) -> Candidate | None:
    m = _USE_FOR.match(clause)
    if not m:
        return None
    tool = clean_value(m.group("x"))
    task = clean_value(re.sub(r"\s+and\s.*$", "", m.group("t"), flags=_I))
    if not tool or not task or len(words_of(tool)) > 5 or len(words_of(task)) > 4:
        return None
    return Candidate(f"tool for {task}", tool, 0.7)


_ALWAYS = re.compile(r"^(?:please\s+)?(?P<m>always|never)\s+(?P<x>.+)$", _I)


def _rule_always(clause: str) -> Candidate | None:
    m = _ALWAYS.match(clause)
    if not m:
        return None
    mode = m.group("m").lower()
    what = clean_value(m.group("x"), cut=False)
    if not what or what.lower().startswith("mind") or len(words_of(what)) > 25:
        return None
    return Candidate(f"{mode} {what}", f"Wants the assistant to {mode} {what}", 0.8)


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


def _rule_my_is(clause: str) -> Candidate | None:
    m = _MY_IS.match(clause)
    if not m:
        return None
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


PERSONAL_RULES: tuple[Callable[[str], Candidate | None], ...] = (
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


def rule_remember(clause: str) -> Candidate | None:
    m = _REMEMBER.match(clause)
    if not m:
        return None
    inner = strip_fillers(m.group("x").strip().rstrip("?"))
    if not inner or _REMEMBER_NOISE.match(inner):
        return None
    for rule in PERSONAL_RULES:
        found = rule(inner)
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


def first_match(clause: str) -> Candidate | None:
    for rule in PERSONAL_RULES:
        found = rule(clause)
        if found is not None:
            return found
    return None
