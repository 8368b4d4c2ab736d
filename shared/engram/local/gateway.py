"""What API Gateway (HTTP API, payload v2.0) does in front of the Lambda handlers, without
sockets: for a request it matches a route key (``"GET /v1/memories/{id}"``; literal segments
beat ``{params}``), verifies the bearer token like the JWT authorizer (401 JSON on failure;
public routes take none), flattens the claims to strings as API Gateway does (a list becomes
``"[a b]"``), builds the v2.0 event, calls the handler the route table names with a fake
Lambda context, and turns its response back into HTTP. A path without the method gets 405
with ``Allow``; no path, 404.
"""

from __future__ import annotations

import base64
import json
import logging
import time
import uuid
from collections.abc import Iterable, Mapping
from dataclasses import dataclass
from typing import Any
from urllib.parse import parse_qsl, unquote, urlsplit

from engram.api.errors import HttpError, error_response
from engram.api.mcp_routes import MCP_PUBLIC_ROUTES
from engram.api.routes import PUBLIC_ROUTES as API_PUBLIC_ROUTES
from engram.errors import Unauthorized
from engram.local.lambda_context import FakeLambdaContext, LambdaHandler
from engram.local.tokens import TokenSigner
from engram.settings import Settings

_log = logging.getLogger("engram.local.gateway")

#: ``{"GET /v1/memories/{id}": handler}``; ``{name+}`` matches the rest of the path.
RouteTable = dict[str, LambdaHandler]

#: What the local authorizer lets through without a token: the API's public routes and the
#: MCP endpoint's sign-in metadata.
PUBLIC_ROUTES: frozenset[str] = API_PUBLIC_ROUTES | MCP_PUBLIC_ROUTES
_METHODS = ("GET", "POST", "PUT", "PATCH", "DELETE", "HEAD", "OPTIONS")


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


def _headers_and_cookies(headers: Iterable[tuple[str, str]]) -> tuple[dict[str, str], list[str]]:
    """Header names lower-cased, repeated headers joined with ``,``; cookies apart."""
    merged: dict[str, str] = {}
    cookies: list[str] = []
    for name, value in headers:
        lname = name.lower()
        if lname == "cookie":
            cookies.extend(c.strip() for c in value.split(";") if c.strip())
            continue
        merged[lname] = f"{merged[lname]},{value}" if lname in merged else value
    return merged, cookies


def _query_parameters(raw_query: str) -> dict[str, str]:
    """Query parameters as API Gateway passes them: a repeated one joined with ``,``."""
    query: dict[str, str] = {}
    for k, v in parse_qsl(raw_query, keep_blank_values=True):
        query[k] = f"{query[k]},{v}" if k in query else v
    return query


def _request_context(
    *, method: str, raw_path: str, route_key: str, headers: Mapping[str, str], source_ip: str
) -> dict[str, Any]:
    now = time.time()
    return {
        "accountId": "000000000000",
        "apiId": "local",
        "domainName": headers.get("host", "localhost"),
        "domainPrefix": "local",
        "http": {
            "method": method,
            "path": raw_path,
            "protocol": "HTTP/1.1",
            "sourceIp": source_ip,
            "userAgent": headers.get("user-agent", ""),
        },
        "requestId": base64.b32encode(uuid.uuid4().bytes[:10]).decode().rstrip("="),
        "routeKey": route_key,
        "time": time.strftime("%d/%b/%Y:%H:%M:%S +0000", time.gmtime(now)),
        "timeEpoch": int(now * 1000),
    }


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
    merged, cookies = _headers_and_cookies(headers)
    context = _request_context(
        method=method, raw_path=raw_path, route_key=route_key, headers=merged, source_ip=source_ip
    )
    context["stage"] = stage
    if claims is not None:
        flat = flatten_claims(claims)
        scope = flat.get("scope")
        context["authorizer"] = {
            "jwt": {"claims": flat, "scopes": scope.split() if scope else None}
        }
    try:
        text_body, is_text = body.decode("utf-8"), True
    except UnicodeDecodeError:
        text_body, is_text = base64.b64encode(body).decode("ascii"), False
    event: dict[str, Any] = {
        "version": "2.0",
        "routeKey": route_key,
        "rawPath": raw_path,
        "rawQueryString": raw_query,
        "headers": merged,
        "requestContext": context,
        "isBase64Encoded": not is_text,
    }
    if cookies:
        event["cookies"] = cookies
    query = _query_parameters(raw_query)
    if query:
        event["queryStringParameters"] = query
    if path_parameters:
        event["pathParameters"] = dict(path_parameters)
    if body:
        event["body"] = text_body
    return event


@dataclass
class HttpResult:
    status: int
    headers: list[tuple[str, str]]
    body: bytes


def error_result(err: HttpError) -> HttpResult:
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
                    return error_result(error_response(exc))
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
                return error_result(
                    HttpError(500, "internal", "internal error")
                    if error_response(exc).status == 500
                    else error_response(exc)
                )
            return lambda_response_to_http(response)
        allowed = self.allowed_methods(raw_path)
        if allowed:
            # the path exists, just not for this method (TRACE, QUERY, PROPFIND, a POST on a
            # GET-only route, ...): 405 with the methods it has, before any token check
            return error_result(
                HttpError(
                    405,
                    "method_not_allowed",
                    f"{method} is not allowed here; allowed: {', '.join(allowed)}",
                    headers={"Allow": ", ".join(allowed)},
                )
            )
        return error_result(HttpError(404, "not_found", "not found"))

    def allowed_methods(self, raw_path: str) -> list[str]:
        """The methods some route has for ``raw_path`` (sorted; empty: no such path)."""
        methods: set[str] = set()
        for route, _ in self.routes:
            if route.method == "ANY":
                continue
            if route.match(route.method, raw_path) is not None:
                methods.add(route.method)
        return sorted(methods)
