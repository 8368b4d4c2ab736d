"""``Parts``: what every part of a ``Container`` is built with — the settings, the clock, the
Secrets Manager client — and ``part``, the rule that each part is built once, on first use,
unless it was given."""

from __future__ import annotations

import threading
from collections.abc import Callable
from typing import TYPE_CHECKING, Any, Generic, TypeVar, overload

from engram.clock import Clock, SystemClock
from engram.settings import Settings, get_settings

if TYPE_CHECKING:
    from engram.adapters.secrets import SecretsClient

T = TypeVar("T")


class part(Generic[T]):  # noqa: N801 - used as a decorator, like ``property``
    """A part of a container: ``build(container)`` runs once, on first use, under the
    container's lock, unless the part was given to the constructor; then the same object is
    returned every time."""

    def __init__(self, build: Callable[[Any], T]) -> None:
        self._build = build
        self._name = build.__name__
        self.__doc__ = build.__doc__

    def __set_name__(self, owner: type, name: str) -> None:
        self._name = name

    @overload
    def __get__(self, container: None, owner: type) -> part[T]: ...

    @overload
    def __get__(self, container: Parts, owner: type) -> T: ...

    def __get__(self, container: Parts | None, owner: type) -> part[T] | T:
        if container is None:
            return self
        return container._part(self._name, lambda: self._build(container))


class Parts:
    """Lazily built parts of one process. Every keyword of ``parts`` is a part (a ``part``
    of this class) given instead of built; ``None`` is a value (say, no ingest queue)."""

    def __init__(
        self,
        settings: Settings | None = None,
        *,
        clock: Clock | None = None,
        secrets: SecretsClient | None = None,
        migrate: bool | None = None,
        **parts: Any,
    ) -> None:
        """``secrets``: the Secrets Manager client the credentials are read with;
        ``migrate=False``: the embedded database is used as it is (the caller migrated it)."""
        unknown = sorted(
            name for name in parts if not isinstance(getattr(type(self), name, None), part)
        )
        if unknown:
            raise TypeError(f"not parts of a Container: {', '.join(unknown)}")
        self.settings = settings or get_settings()
        self.clock: Clock = clock or SystemClock()
        self._lock = threading.RLock()
        self._parts: dict[str, Any] = dict(parts)
        self._given = frozenset(parts)
        self._secrets = secrets
        self._migrate = migrate

    def _part(self, name: str, factory: Callable[[], T]) -> T:
        if name in self._parts:
            value: T = self._parts[name]
            return value
        with self._lock:
            if name not in self._parts:
                self._parts[name] = factory()
            built: T = self._parts[name]
            return built

    def built(self, name: str) -> bool:
        """Whether ``name`` was built (or given) — tests use it to prove laziness."""
        return name in self._parts

    def _secret_client(self) -> SecretsClient:
        from engram.adapters.secrets import secrets_client

        return self._secrets or secrets_client(self.settings.aws_region)
