"""Recall ranking shared by every adapter: scope shadowing, keyword match, RRF fusion.

The documented order of a recall with a query:

1. Candidates are the ``active`` rows of the visible scopes (persona active: persona_user,
   persona and user; otherwise user only). A key visible in several scopes keeps only its
   highest-priority row (persona_user > persona > user) — the others are shadowed even if they
   match the query better.
2. Keyword list: candidates matching *any* query term (full-text search, English stemming,
   stop words ignored), best ``keyword_score`` first: BM25 over the caller's visible memories
   (``N`` of them, ``df(t)`` containing term ``t``; ``idf(t) = ln(1 + (N - df + 0.5) /
   (df + 0.5))``, term frequency saturated by ``BM25_K1``, no length normalisation) times
   coverage, the share of the query's distinct terms the memory contains. Statistics are
   taken over the visible rows before shadowing.
3. Vector list (only when an embedder is configured): candidates with an embedding of the
   same embedder (``embedding_model``) whose cosine similarity to the query is at least the
   embedder's ``min_similarity``, most similar first. Exact: every candidate is compared.
4. Fusion, as the embedder's ``RecallTuning`` says: weighted reciprocal rank fusion
   (``score = sum(weight / (rrf_k + rank))`` over the lists a row appears in, rank 1-based)
   or weighted score fusion (the keyword score over the query's best, and the cosine, each
   times its weight). Keyword-only recall has one list: its order is the keyword order.

Ties of a score (in each list and after fusion) go to the higher confidence, then to the
smaller key (code-point order), then to the smaller id: never to when a memory was written.

An empty query skips 2–4: candidates ordered by confidence, then ``updated_at`` (newest first).
"""

from __future__ import annotations

import hashlib
import math
import re
from collections import Counter
from collections.abc import Iterable, Sequence

from engram.memories.keys import canonical_key
from engram.memories.models import SCOPE_PRIORITY, Memory, RecallTuning

DEFAULT_TUNING = RecallTuning()
RRF_K = DEFAULT_TUNING.rrf_k
BM25_K1 = 1.2
MIN_SIMILARITY = DEFAULT_TUNING.min_similarity
CANDIDATES_PER_LIST = 100
TEXT_SEARCH_CONFIG = "english"

_WORD = re.compile(r"[^\W_]+", re.UNICODE)

# PostgreSQL's English stop words (the subset that matters for short memories).
STOP_WORDS = frozenset(
    """a about above after again against all am an and any are as at be because been before
    being below between both but by can did do does doing down during each few for from further
    had has have having he her here hers herself him himself his how i if in into is it its
    itself just me more most my myself no nor not now of off on once only or other our ours
    ourselves out over own s same she should so some such t than that the their theirs them
    themselves then there these they this those through to too under until up very was we were
    what when where which while who whom why will with you your yours yourself yourselves""".split()  # noqa: SIM905
)


def terms(text: str) -> list[str]:
    """Lower-cased words of ``text`` without stop words (the in-memory keyword analyser)."""
    return [w for w in (m.group(0).lower() for m in _WORD.finditer(text)) if w not in STOP_WORDS]


def _stem(word: str) -> str:
    # A deliberately small suffix stripper so "prefers" meets "prefer" in the in-memory adapter.
    for suffix in ("ing", "es", "s", "ed"):
        if len(word) > len(suffix) + 2 and word.endswith(suffix):
            return word[: -len(suffix)]
    return word


def _doc_terms(memory: Memory) -> list[str]:
    return [_stem(t) for t in terms(f"{memory.key} {memory.value}")]


def keyword_scores(query_terms: Sequence[str], docs: Sequence[Memory]) -> dict[str, float]:
    """BM25 x coverage (see the module docstring) of every doc matching a query term, by id;
    the statistics are those of ``docs``."""
    wanted = {_stem(t) for t in query_terms}
    if not wanted:
        return {}
    counts = {m.id: Counter(t for t in _doc_terms(m) if t in wanted) for m in docs}
    df = Counter(t for tf in counts.values() for t in tf)
    n = len(docs)
    idf = {t: math.log(1 + (n - d + 0.5) / (d + 0.5)) for t, d in df.items()}
    return {
        mid: sum(idf[t] * f * (BM25_K1 + 1) / (f + BM25_K1) for t, f in tf.items())
        * len(tf)
        / len(wanted)
        for mid, tf in counts.items()
        if tf
    }


def cosine(a: Sequence[float], b: Sequence[float]) -> float:
    dot = sum(x * y for x, y in zip(a, b, strict=False))
    na = math.sqrt(sum(x * x for x in a))
    nb = math.sqrt(sum(y * y for y in b))
    if na == 0 or nb == 0:
        return 0.0
    return dot / (na * nb)


def tie_key(memory: Memory) -> tuple[float, str, str]:
    """The order of memories whose scores tie (module docstring)."""
    return (-memory.confidence, memory.key, memory.id)


def unranked_key(memory: Memory) -> tuple[float, float, str]:
    """The order without a query: confidence, then newest first."""
    return (-memory.confidence, -memory.updated_at.timestamp(), memory.id)


def shadow(candidates: Iterable[Memory]) -> list[Memory]:
    """Keep, for each key (however spelt), only the row of the highest-priority scope."""
    best: dict[str, Memory] = {}
    for m in candidates:
        key = canonical_key(m.key)
        current = best.get(key)
        if current is None or SCOPE_PRIORITY[m.scope] > SCOPE_PRIORITY[current.scope]:
            best[key] = m
    return list(best.values())


def rrf_fuse(
    ranked_lists: Sequence[Sequence[Memory]],
    limit: int,
    k: int = RRF_K,
    weights: Sequence[float] | None = None,
) -> list[Memory]:
    """Weighted reciprocal rank fusion of ranked lists (1-based ranks; every weight 1 unless
    given), ties as documented above."""
    scores: dict[str, float] = {}
    rows: dict[str, Memory] = {}
    for i, ranked in enumerate(ranked_lists):
        weight = 1.0 if weights is None else weights[i]
        for rank, m in enumerate(ranked, start=1):
            scores[m.id] = scores.get(m.id, 0.0) + weight / (k + rank)
            rows[m.id] = m
    ordered = sorted(rows.values(), key=lambda m: (-scores[m.id], *tie_key(m)))
    return ordered[:limit]


def rank_in_memory(
    candidates: Sequence[Memory],
    query: str,
    limit: int,
    *,
    query_embedding: Sequence[float] | None = None,
    embeddings: dict[str, list[float]] | None = None,
    tuning: RecallTuning = DEFAULT_TUNING,
) -> list[Memory]:
    """The whole documented recall order over already-visible active candidates."""
    visible = shadow(candidates)
    if not query.strip():
        return sorted(visible, key=unranked_key)[:limit]
    scores = keyword_scores(terms(query), candidates)
    keyword = sorted(
        (m for m in visible if m.id in scores), key=lambda m: (-scores[m.id], *tie_key(m))
    )[:CANDIDATES_PER_LIST]
    lists: list[list[Memory]] = [keyword]
    if query_embedding is not None and embeddings is not None:
        sims = [
            (cosine(query_embedding, embeddings[m.id]), m) for m in visible if m.id in embeddings
        ]
        vector = [
            m
            for s, m in sorted(sims, key=lambda sm: (-sm[0], *tie_key(sm[1])))
            if s >= tuning.min_similarity
        ][:CANDIDATES_PER_LIST]
        if tuning.fusion == "score":
            similarity = {m.id: s for s, m in sims}
            return score_fuse(keyword, scores, vector, similarity, limit=limit, tuning=tuning)
        return rrf_fuse(
            [keyword, vector], limit, tuning.rrf_k, (tuning.keyword_weight, tuning.vector_weight)
        )
    return rrf_fuse(lists, limit, tuning.rrf_k)


def score_fuse(
    keyword: Sequence[Memory],
    keyword_scores: dict[str, float],
    vector: Sequence[Memory],
    similarity: dict[str, float],
    *,
    limit: int,
    tuning: RecallTuning,
) -> list[Memory]:
    """Weighted score fusion (``RecallTuning``), ties as documented above."""
    best = max((keyword_scores[m.id] for m in keyword), default=0.0) or 1.0
    scores: dict[str, float] = {}
    rows: dict[str, Memory] = {}
    for m in keyword:
        scores[m.id] = tuning.keyword_weight * keyword_scores[m.id] / best
        rows[m.id] = m
    for m in vector:
        scores[m.id] = scores.get(m.id, 0.0) + tuning.vector_weight * max(similarity[m.id], 0.0)
        rows[m.id] = m
    ordered = sorted(rows.values(), key=lambda m: (-scores[m.id], *tie_key(m)))
    return ordered[:limit]


class HashingEmbedder:
    """A deterministic bag-of-words embedder (feature hashing, L2-normalised).

    No model and no network: texts sharing words are similar, others are orthogonal-ish.
    Used by tests and benchmarks for the vector path, never in production.
    """

    def __init__(self, dimensions: int = 64) -> None:
        self._dimensions = dimensions

    @property
    def dimensions(self) -> int:
        return self._dimensions

    @property
    def model_id(self) -> str:
        return f"hashing-{self._dimensions}"

    @property
    def tuning(self) -> RecallTuning:
        return DEFAULT_TUNING

    def embed(self, texts: list[str]) -> list[list[float]]:
        out: list[list[float]] = []
        for text in texts:
            vec = [0.0] * self._dimensions
            for word in terms(text):
                digest = hashlib.blake2b(_stem(word).encode(), digest_size=8).digest()
                bucket = int.from_bytes(digest[:4], "big") % self._dimensions
                sign = 1.0 if digest[4] & 1 else -1.0
                vec[bucket] += sign
            norm = math.sqrt(sum(v * v for v in vec))
            out.append([v / norm for v in vec] if norm else vec)
        return out
