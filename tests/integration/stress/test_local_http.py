"""The local server does not stall small keep-alive responses.

Found by the benchmarks: the server used to write the headers and then the body in two sends
on a socket without ``TCP_NODELAY``, so on a keep-alive connection Nagle's algorithm held the
body until the client's delayed ACK (~40 ms per small response: ``GET /v1/tools`` measured
~44 ms p50, ~1.5 ms without the stall). Generous bound: 20 sequential keep-alive requests
within 400 ms (20 ms each), where the stall alone would cost 800 ms.
"""

from __future__ import annotations

import time

from tests.integration.stress.conftest import Live


def test_small_keep_alive_responses_do_not_stall(live: Live) -> None:
    http = live.user()
    assert http.get("/v1/tools").status_code == 200  # warm: connection, token key, handler
    started = time.monotonic()
    for _ in range(20):
        assert http.get("/v1/tools").status_code == 200
    assert time.monotonic() - started < 0.4
