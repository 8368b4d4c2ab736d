"""Text hygiene for extracted memories: key normalisation, value sanitising, injection screen.

Pure functions, no I/O. The rules here are the documented contract of ``docs/extraction.md``:

* **Keys** are short labels: Unicode NFKC, lower case, separators (``_ - / : . ,`` …) become
  spaces, anything but letters, digits, spaces and ``' + # &`` is dropped, whitespace collapses,
  at most :data:`MAX_KEY_WORDS` words are kept and the result is at most :data:`MAX_KEY_CHARS`.
* **Values** are plain text on one line: control and format characters (C0/C1, zero-width,
  bidi overrides) are removed, line breaks and tabs become spaces, whitespace collapses.
* **Secrets** (keys naming passwords, PINs, API keys, tokens, card numbers, social security
  numbers…) are detected by :func:`looks_secret`; extractors never propose them.
* **Instruction-shaped text** (prompt-injection markers such as "ignore previous
  instructions", "reveal the system prompt", "you are now …", chat-role markers) is detected by
  :func:`looks_like_instruction`; extractors drop such proposals instead of storing them.
"""

from __future__ import annotations

import re
import unicodedata

from engram import limits

MAX_KEY_CHARS = limits.MAX_KEY_CHARS
MAX_KEY_WORDS = 6
MAX_VALUE_CHARS = limits.MAX_VALUE_CHARS

_KEY_SEPARATORS = re.compile(r"[_\-/\\:;.,|=()\[\]{}\"`]+")
_KEY_DISALLOWED = re.compile(r"[^\w\s'+#&]", re.UNICODE)
_WHITESPACE = re.compile(r"\s+")


def strip_control(text: str) -> str:
    """Remove control/format characters; line breaks and tabs become spaces."""
    out: list[str] = []
    for ch in text:
        if ch in "\n\r\t\v\f\u2028\u2029\x85":
            out.append(" ")
            continue
        category = unicodedata.category(ch)
        if category in ("Cc", "Cf", "Cs", "Co", "Cn"):
            continue
        out.append(ch)
    return "".join(out)


def normalise_key(raw: str) -> str:
    """The canonical form of a memory key (may be ``""`` when nothing usable is left)."""
    text = unicodedata.normalize("NFKC", strip_control(raw)).lower()
    text = text.replace("\u2019", "'")
    text = _KEY_SEPARATORS.sub(" ", text)
    text = _KEY_DISALLOWED.sub("", text).replace("_", " ")
    words = [w.strip("'") for w in _WHITESPACE.split(text)]
    words = [w for w in words if w][:MAX_KEY_WORDS]
    key = " ".join(words)
    if len(key) > MAX_KEY_CHARS:
        key = key[:MAX_KEY_CHARS].rsplit(" ", 1)[0] if " " in key[:MAX_KEY_CHARS] else ""
        key = key or " ".join(words)[:MAX_KEY_CHARS]
    return key.strip()


def sanitise_value(raw: str) -> str:
    """Plain one-line text: no control characters, collapsed whitespace (not truncated)."""
    return _WHITESPACE.sub(" ", strip_control(raw)).strip()


def bound(text: str, limit: int) -> str:
    """Truncate ``text`` to ``limit`` characters, on a word boundary when there is one."""
    if len(text) <= limit:
        return text
    cut = text[:limit]
    head = cut.rsplit(" ", 1)[0]
    return (head if len(head) >= limit // 2 else cut).rstrip(" ,;:-")


_INSTRUCTION_PATTERNS: tuple[re.Pattern[str], ...] = tuple(
    re.compile(p, re.IGNORECASE)
    for p in (
        # "ignore/disregard/forget/override (all) (previous|prior|above) instructions/rules/…"
        r"\b(ignore|disregard|forget|override|bypass|skip)\b[^.]{0,40}?\b"
        r"(instructions?|prompts?|rules|guidelines|directions|directives|guardrails|context)\b",
        # "reveal/print/leak … system prompt / secrets / api keys / passwords / credentials"
        r"\b(reveal|print|show|output|leak|dump|expose|repeat|disclose|send|tell)\b[^.]{0,40}?\b"
        r"(system\s+prompt|secrets?|passwords?|api\s*keys?|credentials|tokens?|"
        r"instructions|hidden\s+\w+)\b",
        r"\bsystem\s+prompt\b",
        r"\byou\s+(are|will)\s+now\b",
        r"\bfrom\s+now\s+on,?\s+you\b",
        r"\b(act|behave)\s+as\s+(if|an?|the)\b",
        r"\bpretend\s+(to\s+be|you)\b",
        r"\bnew\s+(instructions|rules|persona)\b",
        r"\b(developer|god|jailbreak|dan)\s+mode\b",
        r"\bjailbreak",
        r"\bdo\s+anything\s+now\b",
        r"(^|\s)(system|assistant|user|human)\s*:",
        r"<\s*/?\s*(system|assistant|user|instructions?|memories|memory|im_start|im_end)\b",
        r"<\|",
        r"\[/?(INST|SYS)\]",
        r"```",
    )
)


def looks_like_instruction(text: str) -> bool:
    """True when ``text`` reads like an instruction to the assistant or a prompt-injection.

    Ordinary user preferences ("answer in French", "use metric units") are *not* matched;
    the screen targets attempts to change the assistant's rules, to exfiltrate hidden data,
    or to forge chat-role/markup boundaries.
    """
    folded = unicodedata.normalize("NFKC", text)
    return any(p.search(folded) for p in _INSTRUCTION_PATTERNS)


_SECRET_KEY = re.compile(
    r"\b(passwords?|passcodes?|passphrases?|pin|pin\s+code|api\s+keys?|access\s+keys?|"
    r"secret|secrets|secret\s+key|private\s+key|tokens?|credentials?|otp|one\s+time\s+code|"
    r"credit\s+card|card\s+number|cvv|cvc|iban|bank\s+account|account\s+number|"
    r"ssn|social\s+security(?:\s+number)?|routing\s+number)\b",
    re.IGNORECASE,
)
_CARD_NUMBER = re.compile(r"\b(?:\d[ -]?){13,19}\b")


def looks_secret(key: str, value: str = "") -> bool:
    """True for credentials and payment/identity numbers, which must never become memories:
    a card-like number anywhere in the value, or a key naming a secret ("wifi password",
    "api key", "pin") with a short token-like value (at most 6 words). Longer prose about a
    secret ("Users ask how to reset their password") is not itself a secret."""
    if _CARD_NUMBER.search(value):
        return True
    return bool(_SECRET_KEY.search(key)) and len(value.split()) <= 6
