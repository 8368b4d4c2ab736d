"""An offline embedder: WordLlama's static token vectors, shipped inside the ``wordllama`` wheel.

WordLlama (MIT) is a table of 32,000 token vectors (256 dimensions, float16, 16 MB) distilled
from a large language model's token embeddings, with the Llama 2 tokenizer. A text's vector is
the mean of its tokens' vectors, L2-normalised: no neural network runs, so it needs neither
torch nor onnxruntime, and one text costs tens of microseconds on one core.

Both files are read from the installed package folder. ``wordllama.WordLlama.load()`` is not
used: it looks for the tokenizer in a folder that does not exist in the wheel and then tries to
download one, and importing the ``wordllama`` package configures the root logger. Nothing here
touches the network, and nothing is read before the first ``embed`` call.
"""

from __future__ import annotations

from pathlib import Path
from typing import Any

from engram.adapters.offline_embedder import OfflineEmbedder, installed_folder
from engram.memories.models import RecallTuning

#: Chosen by measurement on LoCoMo's development half (docs/memories.md, bench/quality/sweep.py
#: then make eval): weighted score fusion, three parts keywords to one part cosine, every
#: vector of the 100 nearest counted (a threshold only lowered R@10).
WORDLLAMA_TUNING = RecallTuning(
    fusion="score",
    min_similarity=0.0,
    keyword_weight=0.75,
    vector_weight=0.25,
    duplicate_similarity=0.67,  # bench_duplicates: precision 0.97, recall 0.82 on its pairs
)

WORDLLAMA_CONFIG = "l2_supercat"
WORDLLAMA_DIMENSIONS = 256
_WEIGHTS = f"weights/{WORDLLAMA_CONFIG}_{WORDLLAMA_DIMENSIONS}.safetensors"
_TOKENIZER = f"tokenizers/{WORDLLAMA_CONFIG}_tokenizer_config.json"
_TENSOR = "embedding.weight"
MAX_TOKENS = 512
"""Tokens of one text that count (a memory is at most 2,000 characters, about 500 tokens)."""
_CHUNK = 1024
"""Texts tokenised and summed at once (bounds the token rows held in memory)."""


def package_folder() -> Path:
    """The installed ``wordllama`` folder, found without importing the package."""
    missing = "ENGRAM_EMBEDDER=local needs wordllama: install engram[local]"
    return installed_folder("wordllama", missing=missing)


class WordLlamaEmbedder(OfflineEmbedder):
    """``Embedder`` over WordLlama's bundled ``l2_supercat`` 256-dimension vectors; its
    ``model_id`` is ``wordllama-l2_supercat-256-`` and the weights' digest."""

    dimensions = WORDLLAMA_DIMENSIONS
    tuning = WORDLLAMA_TUNING
    name = f"wordllama-{WORDLLAMA_CONFIG}-{WORDLLAMA_DIMENSIONS}"
    weights = _WEIGHTS
    tokenizer = _TOKENIZER
    max_tokens = MAX_TOKENS
    installed = staticmethod(package_folder)

    def embed(self, texts: list[str]) -> list[list[float]]:
        """Mean of the texts' token vectors, L2-normalised; a text without tokens gives the
        zero vector (the service stores no embedding for it)."""
        return [row.tolist() for row in self.embed_array(texts)]

    def embed_array(self, texts: list[str]) -> Any:
        """``embed`` as one float32 array (a row per text), without a Python loop over the
        texts: a batch of many short texts (the maintenance job's backlog, a benchmark's
        million rows) costs a few microseconds a text."""
        import numpy as np

        tensors, tokenizer = self._load()
        table = tensors[_TENSOR]  # kept as shipped (float16): a text converts only its own rows
        out = np.zeros((len(texts), WORDLLAMA_DIMENSIONS), dtype=np.float32)
        for start in range(0, len(texts), _CHUNK):
            encodings = tokenizer.encode_batch(
                texts[start : start + _CHUNK], add_special_tokens=False
            )
            lengths = np.fromiter((len(e.ids) for e in encodings), np.int64, len(encodings))
            if not lengths.any():
                continue
            ids = np.concatenate([np.asarray(e.ids, dtype=np.int64) for e in encodings])
            rows = table[np.clip(ids, 0, table.shape[0] - 1)].astype(np.float32)
            present = np.flatnonzero(lengths)
            offsets = np.concatenate(([0], np.cumsum(lengths)[:-1]))[present]
            sums = np.add.reduceat(rows, offsets, axis=0)
            norms = np.linalg.norm(sums, axis=1, keepdims=True)
            # the mean's direction is the sum's: normalising the sum gives the same vector
            np.divide(sums, norms, out=sums, where=norms > 0)
            out[start + present] = sums
        return out
