"""What the offline embedders share: a model's files found in an installed package's folder
(nothing is imported from the package, nothing is downloaded), read once on first use, and a
model id that names the weights' digest (a package upgrade that changes the vectors changes
the id, and rows get re-embedded)."""

from __future__ import annotations

import hashlib
import importlib.util
import threading
from collections.abc import Callable
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any


def installed_folder(package: str, *, missing: str) -> Path:
    """The folder of the installed ``package``, found without importing it; ``RuntimeError``
    with ``missing`` (what to install) when it is not installed."""
    spec = importlib.util.find_spec(package)
    if spec is None or not spec.submodule_search_locations:
        raise RuntimeError(missing)
    return Path(next(iter(spec.submodule_search_locations)))


@dataclass
class LazyWeights:
    """The tensors (the safetensors file ``weights``) and the tokenizer (``tokenizer``,
    truncating at ``max_tokens``, no padding) of the model ``name``, read from ``folder()`` on
    first use, once, under a lock."""

    name: str
    weights: str
    tokenizer: str
    max_tokens: int
    folder: Callable[[], Path]
    _lock: threading.Lock = field(default_factory=threading.Lock, init=False, repr=False)
    _model: tuple[dict[str, Any], Any] | None = field(default=None, init=False, repr=False)
    _model_id: str | None = field(default=None, init=False)

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

                    folder = self.folder()
                    weights = folder / self.weights
                    digest = hashlib.sha256(weights.read_bytes()).hexdigest()[:12]
                    tensors = load_file(str(weights))
                    tokenizer = Tokenizer.from_file(str(folder / self.tokenizer))
                    tokenizer.no_padding()
                    tokenizer.enable_truncation(self.max_tokens)
                    self._model_id = f"{self.name}-{digest}"
                    self._model = (tensors, tokenizer)
        return self._model
