"""The local HTTP server: real HTTP in, ``engram.local.gateway.ApiGatewayEmulator`` behind.

Bodies over ``Settings.max_body_bytes`` get 413 without being read; chunked bodies 411; a
``Content-Length`` that is not plain digits or disagrees with itself 400. Errors http.server
raises itself are JSON like the API's. ``LocalService.stop()`` (SIGINT / SIGTERM in
``run_until_signal``) stops accepting connections, waits for in-flight requests, runs the
drain hooks (queues, scheduler, ...) and closes idle keep-alive connections. With
``console=True`` the paths no API route has are the console's (``engram.local.console``).
"""

from __future__ import annotations

import contextlib
import logging
import re
import signal
import socket
import sys
import threading
from collections.abc import Callable, Iterable, Mapping
from email.message import Message
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from types import FrameType
from typing import Any
from urllib.parse import urlsplit

from engram.api.errors import BodyTooLargeError, HttpError, error_response
from engram.local.console import ConsoleSite
from engram.local.gateway import (
    PUBLIC_ROUTES,
    ApiGatewayEmulator,
    HttpResult,
    error_result,
)
from engram.local.lambda_context import LambdaHandler
from engram.local.tokens import TokenSigner, default_signer
from engram.settings import Settings, get_settings

_log = logging.getLogger("engram.local.server")
_DISCARD_LIMIT = 8 * 1024 * 1024


#: ``error.code`` for the protocol-level errors http.server raises itself (``send_error``).
_PROTOCOL_ERROR_CODES = {
    400: "bad_request",
    404: "not_found",
    405: "method_not_allowed",
    408: "request_timeout",
    411: "length_required",
    413: "body_too_large",
    414: "uri_too_long",
    417: "expectation_failed",
    431: "headers_too_large",
    505: "http_version_not_supported",
}


_DIGITS = re.compile(r"[0-9]+")


def content_length(values: Iterable[str]) -> int | None:
    """The body length the ``Content-Length`` header(s) state; ``None`` when it cannot be
    known: a value that is not plain decimal digits (``+5``, ``5_0``, ``5, 6``), or several
    headers that disagree. Where a body ends is never guessed (request smuggling)."""
    found = {v.strip() for v in values}
    if not found:
        return 0
    if len(found) != 1:
        return None
    (value,) = found
    return int(value) if _DIGITS.fullmatch(value) else None


class _Handler(BaseHTTPRequestHandler):
    server: LocalHTTPServer
    protocol_version = "HTTP/1.1"
    server_version = "engram-local"
    timeout = 120  # idle keep-alive connections do not live forever
    sys_version = ""
    # TCP_NODELAY: without it a small keep-alive response waits ~40 ms (Nagle's algorithm
    # holding a segment until the client's delayed ACK). Each response is also one send.
    disable_nagle_algorithm = True

    def log_message(self, format: str, *args: Any) -> None:
        _log.debug("%s - %s", self.address_string(), format % args)

    def _send(self, result: HttpResult, *, close: bool = False) -> None:
        self.send_response(result.status)
        names = {name.lower() for name, _ in result.headers}
        for name, value in result.headers:
            self.send_header(name, value)
        if "content-length" not in names:
            self.send_header("Content-Length", str(len(result.body)))
        if close:
            self.send_header("Connection", "close")
            self.close_connection = True
        # what end_headers() would write (nothing for an HTTP/0.9 request, which has no head)
        buffered: list[bytes] = getattr(self, "_headers_buffer", [])
        head = b"".join(buffered) + b"\r\n" if buffered else b""
        self._headers_buffer: list[bytes] = []
        body = result.body if self.command != "HEAD" else b""
        self.wfile.write(head + body)  # status line, headers and body in one send

    def send_error(self, code: int, message: str | None = None, explain: str | None = None) -> None:
        """http.server's own errors (bad request line, URI too long, ...) as the API's JSON
        errors instead of its HTML page."""
        short = self.responses.get(code, ("error", ""))[0]
        error_code = _PROTOCOL_ERROR_CODES.get(code, "bad_request" if code < 500 else "internal")
        status = code if 400 <= code < 600 else 400
        self._send(error_result(HttpError(status, error_code, message or short)), close=True)

    def __getattr__(self, name: str) -> Callable[[], None]:
        # http.server looks up ``do_<METHOD>`` and answers 501 HTML when it is missing; every
        # method goes to the emulator instead (405 for a path without it, 404 for no path)
        if name.startswith("do_"):
            return self._dispatch
        raise AttributeError(name)

    def _discard(self, length: int) -> None:
        remaining = length
        while remaining > 0:
            chunk = self.rfile.read(min(remaining, 64 * 1024))
            if not chunk:
                return
            remaining -= len(chunk)

    def _dispatch(self) -> None:
        server = self.server
        with server.tracker():
            headers_msg: Message = self.headers
            headers = [(k, v) for k, v in headers_msg.items()]
            if headers_msg.get("Transfer-Encoding", "").lower() == "chunked":
                err = HttpError(411, "length_required", "chunked bodies are not accepted")
                self._send(error_result(err), close=True)
                return
            length = content_length(headers_msg.get_all("Content-Length") or [])
            if length is None:
                err = HttpError(400, "bad_request", "bad or conflicting Content-Length")
                self._send(error_result(err), close=True)
                return
            limit = server.settings.max_body_bytes
            if length > limit:
                # read (and drop) a moderately oversized body so the client sees the 413
                # instead of a connection reset; beyond that, answer and close at once
                if length <= _DISCARD_LIMIT:
                    self._discard(length)
                self._send(error_result(error_response(BodyTooLargeError(limit))), close=True)
                return
            body = self.rfile.read(length) if length else b""
            self._send(
                server.answer(self.command, self.path, headers, body, self.client_address[0])
            )

    do_GET = do_POST = do_PUT = do_PATCH = do_DELETE = do_HEAD = do_OPTIONS = _dispatch  # noqa: N815


class LocalHTTPServer(ThreadingHTTPServer):
    daemon_threads = True
    allow_reuse_address = True
    request_queue_size = 64

    def __init__(
        self,
        address: tuple[str, int],
        emulator: ApiGatewayEmulator,
        settings: Settings,
        site: ConsoleSite | None = None,
    ) -> None:
        self.emulator = emulator
        self.settings = settings
        self.site = site
        self._inflight = 0
        self._cond = threading.Condition()
        self._connections: set[socket.socket] = set()
        super().__init__(address, _Handler)

    def answer(
        self, method: str, target: str, headers: list[tuple[str, str]], body: bytes, ip: str
    ) -> HttpResult:
        """The console site's answer for its paths that no API route has, else the API's."""
        path = urlsplit(target).path or "/"
        site = self.site
        if site is not None and site.serves(path) and not self.emulator.allowed_methods(path):
            return site.handle(method, target, headers, body, ip)
        return self.emulator.handle(method, target, headers, body, ip)

    def process_request_thread(self, request: Any, client_address: Any) -> None:
        with self._cond:
            self._connections.add(request)
        try:
            super().process_request_thread(request, client_address)
        finally:
            with self._cond:
                self._connections.discard(request)

    def close_idle_connections(self) -> None:
        """Shut idle keep-alive connections (call once no request is in flight)."""
        with self._cond:
            connections = list(self._connections)
        for conn in connections:
            with contextlib.suppress(OSError):
                conn.shutdown(socket.SHUT_RDWR)

    @contextlib.contextmanager
    def tracker(self) -> Any:
        with self._cond:
            self._inflight += 1
        try:
            yield
        finally:
            with self._cond:
                self._inflight -= 1
                self._cond.notify_all()

    def wait_idle(self, timeout: float) -> bool:
        with self._cond:
            return self._cond.wait_for(lambda: self._inflight == 0, timeout=timeout)


class LocalService:
    """The HTTP server plus its drain hooks; ``start()`` runs it on a background thread."""

    def __init__(
        self,
        routes: Mapping[str, LambdaHandler],
        *,
        settings: Settings | None = None,
        signer: TokenSigner | None = None,
        host: str | None = None,
        port: int | None = None,
        public_routes: Iterable[str] = PUBLIC_ROUTES,
        console: bool = False,
    ) -> None:
        """``console``: also serve the console, its config and the dev sign-in
        (``engram.local.console``) on the paths outside the API."""
        self.settings = settings or get_settings()
        self.signer = signer or default_signer(self.settings)
        self.site = ConsoleSite(self.settings, self.signer) if console else None
        self.emulator = ApiGatewayEmulator(
            routes, signer=self.signer, settings=self.settings, public_routes=public_routes
        )
        self.httpd = LocalHTTPServer(
            (host or self.settings.host, self.settings.port if port is None else port),
            self.emulator,
            self.settings,
            self.site,
        )
        self._drain_hooks: list[Callable[[], object]] = []
        self._thread: threading.Thread | None = None
        self._stopped = False

    @property
    def url(self) -> str:
        host, port = self.httpd.server_address[:2]
        return f"http://{host!s}:{port}"

    def add_drain_hook(self, hook: Callable[[], object]) -> None:
        """Called, in order, after the last in-flight request finished on shutdown."""
        self._drain_hooks.append(hook)

    def start(self) -> LocalService:
        self._thread = threading.Thread(
            target=self.httpd.serve_forever,
            kwargs={"poll_interval": 0.1},
            daemon=True,
            name="engram-http",
        )
        self._thread.start()
        return self

    def stop(self, timeout: float = 30.0) -> bool:
        """Stop accepting, wait for in-flight requests, run drain hooks. True if all drained."""
        if self._stopped:
            return True
        self._stopped = True
        self.httpd.shutdown()
        idle = self.httpd.wait_idle(timeout)
        self.httpd.close_idle_connections()
        self.httpd.server_close()
        ok = idle
        for hook in self._drain_hooks:
            try:
                result = hook()
                if result is False:
                    ok = False
            except Exception:
                _log.exception("drain hook failed")
                ok = False
        if self._thread is not None:
            self._thread.join(timeout=5)
        return ok

    def run_until_signal(self) -> int:
        """Serve until SIGINT/SIGTERM, then drain and return 0."""
        stop = threading.Event()

        def on_signal(signum: int, frame: FrameType | None) -> None:
            stop.set()

        previous = {sig: signal.signal(sig, on_signal) for sig in (signal.SIGINT, signal.SIGTERM)}
        try:
            self.start()
            while not stop.wait(0.5):
                pass
            print("engram: shutting down, draining in-flight work...", file=sys.stderr)
            self.stop()
            print("engram: stopped", file=sys.stderr)
            return 0
        finally:
            for sig, handler in previous.items():
                signal.signal(sig, handler)
