"""The local server's request handler on the wire: every answer is the API's JSON (unknown
methods, malformed request lines included) and every response leaves in one write on a socket
with TCP_NODELAY. Driven over in-memory streams (no network in unit tests)."""

from __future__ import annotations

import contextlib
import io
import json
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest

from engram.local.gateway import ApiGatewayEmulator
from engram.local.server import LocalHTTPServer, _Handler, content_length
from engram.local.tokens import TokenSigner
from engram.settings import Settings

SETTINGS = Settings()


class Writes(io.RawIOBase):
    """A write-only stream that keeps each ``write`` call (one call = one ``send``)."""

    def __init__(self) -> None:
        self.calls: list[bytes] = []

    def writable(self) -> bool:
        return True

    def write(self, data: Any) -> int:
        self.calls.append(bytes(data))
        return len(data)


class FakeServer:
    def __init__(self, emulator: ApiGatewayEmulator) -> None:
        self.emulator = emulator
        self.settings = SETTINGS
        self.site = None

    answer = LocalHTTPServer.answer

    @contextlib.contextmanager
    def tracker(self) -> Iterator[None]:
        yield


def echo(event: dict[str, Any], context: Any) -> dict[str, Any]:
    return {"statusCode": 200, "headers": {"Content-Type": "application/json"}, "body": "{}"}


@pytest.fixture
def signer(tmp_path: Path) -> TokenSigner:
    return TokenSigner(tmp_path, audience="engram-local", settings=SETTINGS)


def serve_one(signer: TokenSigner, raw_request: bytes) -> Writes:
    """Run the handler for one request read from ``raw_request``; returns what it wrote."""
    emulator = ApiGatewayEmulator(
        {"GET /v1/tools": echo, "POST /v1/memories": echo, "GET /v1/memories": echo},
        signer=signer,
        settings=SETTINGS,
    )
    handler = _Handler.__new__(_Handler)  # no socket: the streams are set by hand
    handler.server = FakeServer(emulator)  # type: ignore[assignment]
    handler.client_address = ("127.0.0.1", 50000)
    handler.rfile = io.BufferedReader(io.BytesIO(raw_request))  # type: ignore[arg-type]
    out = Writes()
    handler.wfile = out  # type: ignore[assignment]
    handler.close_connection = True
    handler.handle_one_request()
    return out


def parse(raw: bytes) -> tuple[int, dict[str, str], bytes]:
    head, _, body = raw.partition(b"\r\n\r\n")
    status_line, *lines = head.decode("latin-1").split("\r\n")
    headers = {}
    for line in lines:
        name, _, value = line.partition(":")
        headers[name.strip().lower()] = value.strip()
    return int(status_line.split()[1]), headers, body


def test_the_handler_sets_tcp_nodelay() -> None:
    # StreamRequestHandler.setup() sets TCP_NODELAY on the connection when this is true
    assert _Handler.disable_nagle_algorithm is True


def test_a_response_is_one_write(signer: TokenSigner) -> None:
    token = signer.issue("alice", "acme")
    out = serve_one(
        signer, f"GET /v1/tools HTTP/1.1\r\nAuthorization: Bearer {token}\r\n\r\n".encode()
    )
    assert len(out.calls) == 1
    status, headers, body = parse(out.calls[0])
    assert status == 200
    assert headers["content-length"] == "2"
    assert body == b"{}"


@pytest.mark.parametrize("method", ["TRACE", "QUERY", "PROPFIND", "PUT"])
def test_a_method_the_path_does_not_have_is_405_json_with_allow(
    signer: TokenSigner, method: str
) -> None:
    out = serve_one(signer, f"{method} /v1/memories HTTP/1.1\r\n\r\n".encode())
    status, headers, body = parse(b"".join(out.calls))
    assert status == 405
    assert headers["allow"] == "GET, POST"
    assert headers["content-type"] == "application/json"
    assert json.loads(body)["error"]["code"] == "method_not_allowed"


def test_an_unknown_method_on_an_unknown_path_is_404_json(signer: TokenSigner) -> None:
    out = serve_one(signer, b"PROPFIND /nowhere HTTP/1.1\r\n\r\n")
    status, _, body = parse(b"".join(out.calls))
    assert status == 404
    assert json.loads(body)["error"]["code"] == "not_found"


@pytest.mark.parametrize(
    ("raw", "status"),
    [
        (b"GET /a b HTTP/1.1\r\n\r\n", 400),  # four words
        (b"GET /" + b"x" * 70_000 + b" HTTP/1.1\r\n\r\n", 414),
    ],
)
def test_protocol_errors_are_json_not_html(signer: TokenSigner, raw: bytes, status: int) -> None:
    out = serve_one(signer, raw)
    got, headers, body = parse(b"".join(out.calls))
    assert got == status
    assert headers["content-type"] == "application/json"
    error = json.loads(body)["error"]
    assert error["code"]
    assert error["message"]


@pytest.mark.parametrize(
    "raw", [b"GET /v1/tools HTTP/9.9\r\n\r\n", b"GET /v1/tools HTTP/1.x\r\n\r\n"]
)
def test_a_request_line_with_a_bad_version_gets_a_bare_json_error(
    signer: TokenSigner, raw: bytes
) -> None:
    # http.server answers a version it cannot parse as HTTP/0.9 would: a body without a head
    out = serve_one(signer, raw)
    assert len(out.calls) == 1
    assert json.loads(out.calls[0])["error"]["code"] in {
        "bad_request",
        "http_version_not_supported",
    }


@pytest.mark.parametrize(
    ("values", "expected"),
    [
        ([], 0),
        (["0"], 0),
        (["12"], 12),
        (["12", "12"], 12),  # repeated, but one length
        (["12", "13"], None),  # conflicting: where does the body end?
        (["+12"], None),
        (["1_2"], None),
        (["12, 13"], None),
        (["-1"], None),
        ([""], None),
        (["１２"], None),  # full-width digits are not decimal digits on the wire
    ],
)
def test_content_length_is_one_plain_decimal_number_or_nothing(
    values: list[str], expected: int | None
) -> None:
    assert content_length(values) == expected
