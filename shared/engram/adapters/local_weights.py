"""What the offline embedders share: a model's files found in an installed package's folder
(nothing is imported from the package, nothing is downloaded), read once on first use, and a
model id that names the weights' digest (a package upgrade that changes the vectors changes
the id, and rows get re-embedded)."""

from __future__ import annotations

import hashlib
import importlib.util
import threading
from collections.abc import Callable
from pathlib import Path
from typing import Any


def installed_folder(package: str, *, missing: str) -> Path:
    """The folder of the installed ``package``, found without importing it; ``RuntimeError``
    with ``missing`` (what to install) when it is not installed."""
    spec = importlib.util.find_spec(package)
    if spec is None or not spec.submodule_search_locations:
        raise RuntimeError(missing)
    return Path(next(iter(spec.submodule_search_locations)))


class LazyWeights:
    """The tensors (a safetensors file) and the tokenizer (truncating at ``max_tokens``, no
    padding) of one model, read from ``folder()`` on first use, once, under a lock."""

    def __init__(
        self,
        name: str,
        *,
        weights: str,
        tokenizer: str,
        max_tokens: int,
        folder: Callable[[], Path],
    ) -> None:
        self._name = name
        self._weights = weights
        self._tokenizer = tokenizer
        self._max_tokens = max_tokens
        self._folder = folder
        self._lock = threading.Lock()
        self._model: tuple[dict[str, Any], Any] | None = None
        self._model_id: str | None = None

    @property
    def model_id(self) -> str:
        """``<name>-`` and the first 12 hex digits of the weights' SHA-256."""
        if self._model_id is None:
            self.get()
        assert self._model_id is not None
        return self._model_id

    def get(self) -> tuple[dict[str, Any], Any]:
        """``(tensors by name, tokenizer)``."""
        if self._model is None:
            with self._lock:
                if self._model is None:
                    from safetensors.numpy import load_file
                    from tokenizers import Tokenizer

                    folder = self._folder()
                    weights = folder / self._weights
                    digest = hashlib.sha256(weights.read_bytes()).hexdigest()[:12]
                    tensors = load_file(str(weights))
                    tokenizer = Tokenizer.from_file(str(folder / self._tokenizer))
                    tokenizer.no_padding()
                    tokenizer.enable_truncation(self._max_tokens)
                    self._model_id = f"{self._name}-{digest}"
                    self._model = (tensors, tokenizer)
        return self._model
