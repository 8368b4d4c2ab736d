# ruff: noqa: S608 - SQL is composed only from constants in this module; values are bound.
"""The one recall statement (the documented order of ``engram.memories.recall``) in SQL.

``recall_sql`` composes it from the visible rows of the caller's scopes, the keyword list
(BM25 x coverage, migration 0008), the vector list (exact cosine over the user's vectors,
read from ``memories_vectors``, migration 0014) and their fusion as the embedder's
``RecallTuning`` says.
"""

from __future__ import annotations

from typing import Any

from engram.adapters.postgres.lifecycle import IDENTITY
from engram.adapters.postgres.rows import COLUMNS, ORDER_TIES, ORDER_UNRANKED
from engram.adapters.postgres.rows import vector_literal as _vector
from engram.memories.models import RecallRequest
from engram.memories.recall import BM25_K1, CANDIDATES_PER_LIST, TEXT_SEARCH_CONFIG

#: The largest dimension ``memories_vectors`` (migration 0014) holds: one B-tree entry takes at
#: most about 2,700 bytes, and a vector takes 4 bytes a dimension.
INDEXED_VECTOR_DIMS = 512

#: The keyword scores (BM25 x coverage, migration 0008): ids and scores only, rows joined back.
_RANKED = "engram_fts_rank(%(query)s, %(cfg)s::regconfig, %(persona)s, %(k1)s) c"

_USER_SCOPE = "(m.scope = 'user' AND m.owner_id = %(user)s)"
_PERSONA_SCOPES = (
    "((m.scope = 'user' AND m.owner_id = %(user)s)"
    " OR (m.scope = 'persona' AND m.owner_id = %(persona)s)"
    " OR (m.scope = 'persona_user' AND m.owner_id = %(persona)s"
    " AND m.user_id = %(user)s))"
)
#: A key visible in a higher scope hides the lower rows of the same key, however each is spelt
#: (``IDENTITY``). Each ``NOT IN`` reads the higher scope's active keys once and hashes them
#: (keys are never NULL, so it means ``NOT EXISTS``), instead of probing once per candidate row.
_HELD = IDENTITY.replace("m.", "h.")
_SHADOWED = (
    f" AND (m.scope = 'persona_user' OR {IDENTITY} NOT IN (SELECT {_HELD}"
    " FROM memories h"
    " WHERE h.team_id = %(team)s AND h.scope = 'persona_user'"
    " AND h.owner_id = %(persona)s AND COALESCE(h.user_id, '') = %(user)s"
    " AND h.status = 'active'))"
    f" AND (m.scope <> 'user' OR {IDENTITY} NOT IN (SELECT {_HELD}"
    " FROM memories h"
    " WHERE h.team_id = %(team)s AND h.scope = 'persona'"
    " AND h.owner_id = %(persona)s AND COALESCE(h.user_id, '') = ''"
    " AND h.status = 'active'))"
)
#: ``ORDER_TIES`` over a derived table that carries ``confidence``, ``key`` and ``id``.
_TIES = 'confidence DESC, key COLLATE "C", id'


def recall_params(request: RecallRequest) -> dict[str, Any]:
    """Every value the statement binds (one set, whichever parts it uses)."""
    return {
        "team": request.team_id,
        "user": request.user_id,
        "persona": request.persona_id,
        "limit": request.limit,
        "query": request.query,
        "cfg": TEXT_SEARCH_CONFIG,
        "emb": _vector(request.embedding),
        "model": request.embedding_model,
        "maxdist": 1.0 - request.tuning.min_similarity,
        "cands": CANDIDATES_PER_LIST,
        "k": request.tuning.rrf_k,
        "wk": request.tuning.keyword_weight,
        "wv": request.tuning.vector_weight,
        "k1": BM25_K1,
    }


def recalled_scopes(request: RecallRequest) -> str:
    """The condition on ``m`` (a memory, or a version of one) of the scopes a recall reads:
    the user's own, and with a persona its ``persona`` rows and the user's ``persona_user``
    rows of it."""
    return _USER_SCOPE if request.persona_id is None else _PERSONA_SCOPES


def visible_rows(request: RecallRequest) -> str:
    """The condition on ``memories m`` of the caller's active, unshadowed rows."""
    scopes = recalled_scopes(request)
    shadowed = "" if request.persona_id is None else _SHADOWED
    return f"m.team_id = %(team)s AND m.status = 'active' AND {scopes}{shadowed}"


def keyword_list(visible: str, *, score_fusion: bool) -> tuple[str, str]:
    """The keyword list's CTE and its part of the fusion."""
    cte = (
        "kw AS (SELECT m.id, m.confidence, m.key, c.score AS s, row_number() OVER"
        f" (ORDER BY c.score DESC, {ORDER_TIES}) AS r FROM {_RANKED}"
        f" JOIN memories m ON m.id = c.id WHERE {visible} ORDER BY r LIMIT %(cands)s)"
    )
    if score_fusion:
        part = (
            "SELECT id, confidence, key, %(wk)s::float8 * s"
            " / (SELECT COALESCE(NULLIF(max(s), 0), 1) FROM kw) AS part FROM kw"
        )
    else:
        part = "SELECT id, confidence, key, %(wk)s::float8 / (%(k)s + r) AS part FROM kw"
    return cte, part


def vector_list(visible: str, dims: int, *, score_fusion: bool) -> tuple[str, str]:
    """The vector list's CTE and its part of the fusion.

    Exact: every visible row of the query's embedder is compared (no approximate index). Each
    row's distance is computed once, in a derived table the planner may not flatten (``OFFSET
    0``), then filtered by the threshold and cut to the nearest ``cands`` (a top-N sort).
    Rows of an embedder of at most ``INDEXED_VECTOR_DIMS`` are read from ``memories_vectors``,
    whose predicate the planner proves only from this very constant.
    """
    indexed = (
        f" AND m.embedding_dims <= {INDEXED_VECTOR_DIMS}" if dims <= INDEXED_VECTOR_DIMS else ""
    )
    cte = (
        "vec AS (SELECT id, confidence, key, 1 - d AS s, row_number() OVER (ORDER BY d, "
        f"{_TIES}) AS r FROM (SELECT id, confidence, key, d FROM (SELECT m.id, m.confidence,"
        " m.key, m.embedding <=> %(emb)s::vector AS d FROM memories m"
        f" WHERE {visible} AND m.embedding IS NOT NULL AND m.embedding_model = %(model)s"
        f"{indexed} OFFSET 0) x WHERE d <= %(maxdist)s"
        f" ORDER BY d, {_TIES} LIMIT %(cands)s) n)"
    )
    if score_fusion:
        part = "SELECT id, confidence, key, %(wv)s::float8 * greatest(s, 0) AS part FROM vec"
    else:
        part = "SELECT id, confidence, key, %(wv)s::float8 / (%(k)s + r) AS part FROM vec"
    return cte, part


def recall_sql(
    request: RecallRequest, *, keyword: bool, vector: bool
) -> tuple[str, dict[str, Any]]:
    """The one recall statement and its parameters."""
    params = recall_params(request)
    visible = visible_rows(request)
    if not keyword and not vector:
        return (
            f"SELECT {COLUMNS} FROM memories m WHERE {visible} "
            f"ORDER BY {ORDER_UNRANKED} LIMIT %(limit)s",
            params,
        )
    if keyword and not vector:
        # one ranked list: its fused order is its own order
        return (
            f"SELECT {COLUMNS} FROM {_RANKED} JOIN memories m ON m.id = c.id WHERE {visible}"
            f" ORDER BY c.score DESC, {ORDER_TIES} LIMIT %(limit)s",
            params,
        )
    score_fusion = request.tuning.fusion == "score"
    parts = []
    if keyword:
        parts.append(keyword_list(visible, score_fusion=score_fusion))
    if vector:
        dims = len(request.embedding or ())
        parts.append(vector_list(visible, dims, score_fusion=score_fusion))
    ctes = [cte for cte, _ in parts]
    # the fused order needs only what the lists carry: the rows are read for the top ones
    ctes.append(
        "fused AS (SELECT id, sum(part) AS score FROM ("
        + " UNION ALL ".join(part for _, part in parts)
        + f") u GROUP BY id, confidence, key ORDER BY score DESC, {_TIES} LIMIT %(limit)s)"
    )
    sql = (
        "WITH "
        + ", ".join(ctes)
        + f" SELECT {COLUMNS} FROM fused f JOIN memories m ON m.id = f.id "
        f"ORDER BY f.score DESC, {ORDER_TIES} LIMIT %(limit)s"
    )
    return sql, params
