"""Unit tests run with the network disabled: any inet connection attempt fails the test."""

from __future__ import annotations

import socket
from collections.abc import Iterator
from typing import Any

import pytest
from tests.support.unreachable import UNREACHABLE

from engram.bootstrap import Container, set_container


class NetworkDisabled(RuntimeError):
    pass


@pytest.fixture(autouse=True)
def _no_network(monkeypatch: pytest.MonkeyPatch) -> None:
    real_connect = socket.socket.connect

    def guarded(self: socket.socket, address: Any) -> Any:
        if self.family in (socket.AF_INET, socket.AF_INET6):
            raise NetworkDisabled(f"unit tests may not open network connections ({address!r})")
        return real_connect(self, address)

    monkeypatch.setattr(socket.socket, "connect", guarded)
    monkeypatch.setattr(socket.socket, "connect_ex", guarded)


@pytest.fixture
def unreachable_container(monkeypatch: pytest.MonkeyPatch) -> Iterator[Container]:
    """The handlers' container, built from settings whose services cannot be reached (and
    Powertools' tracing and metrics off): for tests that call handlers without a service."""
    monkeypatch.setenv("POWERTOOLS_TRACE_DISABLED", "true")
    monkeypatch.setenv("POWERTOOLS_METRICS_DISABLED", "true")
    container = Container(UNREACHABLE)
    old = set_container(container)
    yield container
    set_container(old)
