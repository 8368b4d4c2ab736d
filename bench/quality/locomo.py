"""LoCoMo-shaped data: conversations to memories, questions to queries with evidence keys.

LoCoMo ("Evaluating Very Long-Term Conversational Memory of LLM Agents", ACL 2024) is published
as ``data/locomo10.json`` (inside ``data/locomo10.zip``) of the GitHub repository
``snap-research/locomo``: a JSON list of ten samples ``{sample_id, conversation, qa, ...}``.
``load(path)`` reads that file, one such sample per file, or a folder of ``*.json`` files
(each a sample, a list of samples, or a sample's ``conversation`` fields flattened next to its
``qa``, as the development half ships).

The retrieval task: every turn is one memory, key = its ``dia_id`` (``D3:12``), value =
``"[<session date>] <speaker>: <text>"``; every question of categories 1-4 with usable evidence
is one query against its own conversation's memories, and its relevant keys are its evidence.

Malformed evidence ids are repaired or dropped by one rule (``evidence_keys``): an entry is
split on ``;``, ``,`` and whitespace; each part must read ``D<session>:<turn>`` once stray
colons are ignored (``D:11:26`` -> ``D11:26``) and leading zeros are dropped (``D30:05`` ->
``D30:5``); a part that does not (``D``), or names no turn of the conversation, is dropped and
counted. A question left without evidence is skipped and counted.
"""

from __future__ import annotations

import json
import re
from collections.abc import Iterable, Iterator, Mapping
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

#: LoCoMo's question categories, as the evaluations of memory systems name them.
CATEGORIES: dict[int, str] = {
    1: "multi-hop",
    2: "temporal",
    3: "open-domain",
    4: "single-hop",
    5: "adversarial",
}
#: Category 5 has no answer in the conversation: it is not a retrieval question.
RETRIEVAL_CATEGORIES = frozenset({1, 2, 3, 4})

_SESSION = re.compile(r"^session_(\d+)$")
_EVIDENCE = re.compile(r"^D:?(\d+):+(\d+)$")
_SPLIT = re.compile(r"[;,\s]+")


@dataclass(frozen=True)
class Memory:
    key: str
    value: str


@dataclass(frozen=True)
class Question:
    text: str
    category: int
    evidence: frozenset[str]


@dataclass
class Conversation:
    sample_id: str
    memories: list[Memory]
    questions: list[Question]
    dropped_evidence: list[str] = field(default_factory=list)
    """Evidence entries (or parts of entries) that name no turn, as written in the data."""
    skipped_questions: int = 0
    """Retrieval questions left without usable evidence."""


def evidence_keys(raw: str, known: Iterable[str]) -> tuple[list[str], list[str]]:
    """(keys, dropped parts) of one evidence entry, by the rule in the module docstring."""
    known_set = set(known)
    keys: list[str] = []
    dropped: list[str] = []
    for part in (p for p in _SPLIT.split(raw.strip()) if p):
        match = _EVIDENCE.match(part)
        key = f"D{int(match[1])}:{int(match[2])}" if match else None
        if key is not None and key in known_set:
            keys.append(key)
        else:
            dropped.append(part)
    return keys, dropped


def _sessions(conv: Mapping[str, Any]) -> Iterator[tuple[int, str, list[dict[str, Any]]]]:
    numbers = sorted(int(m[1]) for k in conv if (m := _SESSION.match(k)))
    for n in numbers:
        turns = conv.get(f"session_{n}") or []
        yield n, str(conv.get(f"session_{n}_date_time", "")).strip(), turns


def conversation(sample: Mapping[str, Any], default_id: str) -> Conversation:
    """One sample (``conversation`` nested or flattened beside ``qa``) as memories + questions."""
    conv = sample.get("conversation", sample)
    memories: list[Memory] = []
    for _, date, turns in _sessions(conv):
        for turn in turns:
            prefix = f"[{date}] " if date else ""
            memories.append(
                Memory(str(turn["dia_id"]), f"{prefix}{turn['speaker']}: {turn['text']}")
            )
    known = {m.key for m in memories}
    out = Conversation(str(sample.get("sample_id") or default_id), memories, [])
    for qa in sample.get("qa", []):
        category = int(qa.get("category", 0))
        if category not in RETRIEVAL_CATEGORIES:
            continue
        keys: set[str] = set()
        for raw in qa.get("evidence") or []:
            found, dropped = evidence_keys(str(raw), known)
            keys.update(found)
            out.dropped_evidence += dropped
        if not keys:
            out.skipped_questions += 1
            continue
        out.questions.append(Question(str(qa["question"]), category, frozenset(keys)))
    return out


def _samples(data: Any, stem: str) -> Iterator[tuple[Mapping[str, Any], str]]:
    if isinstance(data, list):
        for i, item in enumerate(data):
            yield item, f"{stem}-{i}"
    elif isinstance(data, dict):
        yield data, stem
    else:
        raise ValueError(f"{stem}: not a LoCoMo sample or list of samples")


def load(path: Path) -> list[Conversation]:
    """Every conversation of a LoCoMo file or folder (see the module docstring)."""
    path = Path(path)
    if not path.exists():
        raise FileNotFoundError(
            f"{path}: no LoCoMo data here. Get data/locomo10.json from "
            "https://github.com/snap-research/locomo (inside data/locomo10.zip) and pass "
            "its path, or the folder of per-conversation files."
        )
    files = sorted(path.glob("*.json")) if path.is_dir() else [path]
    conversations = [
        conversation(sample, default_id)
        for file in files
        for sample, default_id in _samples(json.loads(file.read_text("utf-8")), file.stem)
    ]
    if not conversations:
        raise ValueError(f"{path}: no LoCoMo conversation found")
    ids = [c.sample_id for c in conversations]
    if len(set(ids)) != len(ids):
        raise ValueError(f"{path}: conversation ids repeat: {sorted(ids)}")
    return conversations
