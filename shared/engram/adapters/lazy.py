"""A client or a model made on first use, never at import or construction."""

from __future__ import annotations

import threading
from collections.abc import Callable
from typing import Generic, TypeVar

T = TypeVar("T")


class Lazy(Generic[T]):
    """The value ``make()`` returns, made on the first ``get``, once however many threads ask
    at the same time; a ``make`` that raises leaves nothing made, and the next ``get`` tries
    again. ``value`` given: that value, and ``make`` is never called."""

    def __init__(self, make: Callable[[], T], value: T | None = None) -> None:
        self._make = make
        self._value = value
        self._lock = threading.Lock()

    @property
    def made(self) -> T | None:
        """The value when it has been made, else None (without making it)."""
        return self._value

    def get(self) -> T:
        if self._value is None:
            with self._lock:
                if self._value is None:
                    self._value = self._make()
        return self._value
