"""Make user-controlled names (tools, entities, domains) inert inside a system prompt.

A name becomes one short line of plain text: control, format and line/paragraph separator
characters become spaces; markdown structure (headings, fences, emphasis, links, tables,
quotes) and HTML markers are removed; whitespace collapses; the length is capped; the result
is wrapped in double quotes (inner double quotes become single quotes).
"""

from __future__ import annotations

import re
import unicodedata

MAX_NAME_CHARS = 64
_STRIP = str.maketrans(dict.fromkeys("`#<>*[]|\\{}~=", " "))
_SPACES = re.compile(r"\s+")


def clean_text(text: str, *, max_len: int | None = None, keep_quotes: bool = False) -> str:
    """One line of inert text (no control chars, no markdown/HTML markers)."""
    chars = []
    for ch in text:
        cat = unicodedata.category(ch)
        if cat in {"Cc", "Cf", "Cs", "Co", "Cn", "Zl", "Zp"}:
            chars.append(" ")
        else:
            chars.append(ch)
    out = "".join(chars).translate(_STRIP)
    if not keep_quotes:
        out = out.replace('"', "'")
    out = _SPACES.sub(" ", out).strip().lstrip("-+>:").strip()
    if max_len is not None and len(out) > max_len:
        out = out[: max_len - 1].rstrip() + "…"
    return out


def quote_name(name: str, *, max_len: int = MAX_NAME_CHARS) -> str:
    """``"clean name"`` — a sanitised, length-capped, quoted name."""
    cleaned = clean_text(name, max_len=max_len) or "?"
    return f'"{cleaned}"'
