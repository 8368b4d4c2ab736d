"""Embeddings follow the embedder: rows saved before an embedder was configured, while it was
down, or with another embedder are embedded with the configured one, in bounded batches.

Each batch reads up to ``batch_size`` rows the backlog lists (rows not embedded with the
embedder's ``model_id``), embeds their texts in one call and stores the vectors, each only if
its row still holds the text it was made from. A row is listed until it is stored, so a run
cut short (a crash, the budget) resumes where it stopped and nothing stored is embedded
again. The service stays up throughout: a row not embedded yet is found by keywords only.
"""

from __future__ import annotations

import logging
from collections.abc import Callable
from dataclasses import dataclass

from engram.memories.ports import Embedder, EmbeddingBacklog

log = logging.getLogger("engram.memories.reembed")


@dataclass(frozen=True, slots=True)
class ReembedResult:
    embedded: int
    """Rows whose embedding was stored."""
    skipped: int
    """Rows changed or deleted between the read and the write (left to their save)."""
    batches: int
    done: bool
    """True when the backlog was empty at the end."""


def reembed(
    backlog: EmbeddingBacklog,
    embedder: Embedder,
    *,
    batch_size: int,
    max_batches: int | None = None,
    keep_going: Callable[[], bool] = lambda: True,
) -> ReembedResult:
    """Embed the backlog of ``embedder``'s model, batch after batch, until it is empty, after
    ``max_batches`` or when ``keep_going()`` says stop (checked before each batch)."""
    model = embedder.model_id
    embedded = skipped = batches = 0
    while (max_batches is None or batches < max_batches) and keep_going():
        tasks = backlog.unembedded(model, batch_size)
        if not tasks:
            return ReembedResult(embedded, skipped, batches, done=True)
        vectors = embedder.embed([t.text for t in tasks])
        stored = backlog.set_embeddings(
            model, [(t, v if any(v) else None) for t, v in zip(tasks, vectors, strict=True)]
        )
        batches += 1
        embedded += stored
        skipped += len(tasks) - stored
        log.info(
            "embedded %d rows with %s (%d changed meanwhile)", stored, model, len(tasks) - stored
        )
        if stored == 0:
            # every row of the batch changed under us: stop rather than spin; the next run goes on
            break
    return ReembedResult(embedded, skipped, batches, done=not backlog.unembedded(model, 1))
