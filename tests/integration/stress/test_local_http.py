"""The local server does not stall small keep-alive responses.

Found by the benchmarks: the server used to write the headers and then the body in two sends
on a socket without ``TCP_NODELAY``, so on a keep-alive connection Nagle's algorithm held the
body until the client's delayed ACK (~40 ms per small response: ``GET /v1/tools`` measured
~44 ms p50, ~1.5 ms without the stall). The stall needs both a second send and Nagle's
algorithm, so the test observes the server's own sends (the service runs in this process):
every response of a keep-alive connection is one send on a socket with ``TCP_NODELAY`` set.
"""

from __future__ import annotations

import socket
from typing import Any
from urllib.parse import urlsplit

import pytest
from tests.integration.stress.conftest import Live


def test_small_keep_alive_responses_do_not_stall(
    live: Live, monkeypatch: pytest.MonkeyPatch
) -> None:
    http = live.user()
    assert http.get("/v1/tools").status_code == 200  # warm: connection, token key, handler
    port = urlsplit(live.url).port
    sends: list[tuple[int, bool]] = []  # (server-side connection, TCP_NODELAY) per send
    original = socket.socket.sendall

    def recording(sock: socket.socket, data: Any, *args: Any) -> None:
        if sock.getsockname()[1] == port:
            nodelay = sock.getsockopt(socket.IPPROTO_TCP, socket.TCP_NODELAY) != 0
            sends.append((sock.fileno(), nodelay))
        return original(sock, data, *args)

    monkeypatch.setattr(socket.socket, "sendall", recording)
    for _ in range(20):
        assert http.get("/v1/tools").status_code == 200
    monkeypatch.undo()
    assert len(sends) == 20  # one send per response: head and body together
    assert len({fd for fd, _ in sends}) == 1  # all on the one keep-alive connection
    assert all(nodelay for _, nodelay in sends)
