"""The console beside the API in ``engram serve``: its built files, ``/config.json`` and the dev
sign-in. Nothing here exists in AWS, where CloudFront serves the console and Cognito signs in.

* ``GET /config.json``: ``{"apiUrl": "", "auth": {"mode": "dev"}}`` (the API on the same origin,
  the dev sign-in instead of Cognito);
* ``POST /dev/sign-in`` ``{"user", "team", "admin", "teamAdmin"}`` -> ``{"idToken",
  "expiresIn"}``: a dev token signed by the service's own key (``engram.local.tokens``). It
  answers only a loopback client (127.0.0.0/8, ::1) that names a loopback host (a page on
  another site whose name resolves to 127.0.0.1 does not get one); everyone else gets the 404
  of a path that does not exist. It takes JSON only, so a form on another site cannot post it;
* every other path outside ``/v1``: a file of the built console (``Settings.console_dir``, else
  the repository's ``console/dist``) with its content type, else ``index.html`` for a path
  without a file extension (the console's own routes), else 404. When the console is not
  built, a short page says how to build it.

Every console response carries ``CONTENT_SECURITY_POLICY``: scripts, styles and API calls
from this origin only.
"""

from __future__ import annotations

import ipaddress
import json
import mimetypes
from collections.abc import Iterable
from pathlib import Path
from typing import Annotated, Any
from urllib.parse import unquote, urlsplit

from pydantic import BaseModel, ConfigDict, Field, ValidationError, field_validator

import engram
from engram.api.errors import HttpError, error_response
from engram.fields import Identifier
from engram.identity import SERVICE_USER_PREFIX, TEAM_ID_PATTERN
from engram.local.gateway import HttpResult, error_result
from engram.local.tokens import TokenSigner
from engram.settings import Settings

CONFIG_PATH = "/config.json"
DEV_SIGN_IN_PATH = "/dev/sign-in"
#: Lifetime of a dev sign-in token (the console signs in again when it expires).
DEV_TOKEN_TTL_S = 3600
#: The repository's console build, when ``engram`` runs from a checkout.
REPO_CONSOLE_DIR = Path(engram.__file__).resolve().parents[2] / "console" / "dist"

CONTENT_SECURITY_POLICY = (
    "default-src 'self'; script-src 'self'; style-src 'self'; img-src 'self' data:; "
    "font-src 'self'; connect-src 'self'; object-src 'none'; base-uri 'self'; "
    "form-action 'self'; frame-ancestors 'none'"
)
_SECURITY_HEADERS = (
    ("Content-Security-Policy", CONTENT_SECURITY_POLICY),
    ("X-Content-Type-Options", "nosniff"),
    ("Referrer-Policy", "no-referrer"),
)
_TYPES = {
    ".html": "text/html; charset=utf-8",
    ".js": "text/javascript; charset=utf-8",
    ".mjs": "text/javascript; charset=utf-8",
    ".css": "text/css; charset=utf-8",
    ".json": "application/json",
    ".map": "application/json",
    ".webmanifest": "application/manifest+json",
    ".svg": "image/svg+xml",
    ".png": "image/png",
    ".ico": "image/x-icon",
    ".webp": "image/webp",
    ".woff2": "font/woff2",
    ".woff": "font/woff",
    ".txt": "text/plain; charset=utf-8",
    ".wasm": "application/wasm",
}
_LOOPBACK_NAMES = frozenset({"localhost", "localhost.", "ip6-localhost"})

NOT_BUILT_PAGE = """<!doctype html>
<html lang="en"><head><meta charset="utf-8"><title>Engram console not built</title></head>
<body><main><h1>The Engram console is not built</h1>
<p>The API is running under <code>/v1</code>. To get the console, install Node.js 20.19 or
later and run <code>make setup</code>, or
<code>cd console &amp;&amp; npm ci &amp;&amp; npm run build</code>, then reload this page.</p>
</main></body></html>
"""


class DevSignIn(BaseModel):
    """The body of ``POST /dev/sign-in``."""

    model_config = ConfigDict(extra="forbid", strict=True, populate_by_name=True)

    user: Identifier
    team: Annotated[str, Field(pattern=TEAM_ID_PATTERN)]
    admin: bool = False
    team_admin: bool = Field(default=False, alias="teamAdmin")

    @field_validator("user")
    @classmethod
    def _not_a_service(cls, value: str) -> str:
        if value.startswith(SERVICE_USER_PREFIX):
            raise ValueError(f"must not start with {SERVICE_USER_PREFIX!r}")
        return value


def is_loopback(address: str) -> bool:
    """``address`` is 127.0.0.0/8 or ::1 (also as an IPv4-mapped IPv6 address)."""
    try:
        ip = ipaddress.ip_address(address.split("%", 1)[0])
    except ValueError:
        return False
    if isinstance(ip, ipaddress.IPv6Address) and ip.ipv4_mapped is not None:
        ip = ip.ipv4_mapped
    return ip.is_loopback


def is_loopback_host(host: str | None) -> bool:
    """The ``Host`` header names this machine by a loopback name or address."""
    if not host:
        return False
    name = host.strip().lower()
    if name.startswith("["):
        name = name[1 : name.find("]")] if "]" in name else name
    elif name.count(":") == 1:
        name = name.rsplit(":", 1)[0]
    return name in _LOOPBACK_NAMES or is_loopback(name)


def console_dir(settings: Settings) -> Path:
    """Where the built console is: ``Settings.console_dir``, else the repository's."""
    return settings.console_dir if settings.console_dir is not None else REPO_CONSOLE_DIR


def content_type(path: Path) -> str:
    known = _TYPES.get(path.suffix.lower())
    if known is not None:
        return known
    guessed, _ = mimetypes.guess_type(path.name)
    return guessed or "application/octet-stream"


def _result(status: int, content: str, body: bytes, *extra: tuple[str, str]) -> HttpResult:
    return HttpResult(status, [("Content-Type", content), *_SECURITY_HEADERS, *extra], body)


def _json(status: int, value: Any) -> HttpResult:
    body = json.dumps(value, separators=(",", ":")).encode("utf-8")
    return _result(status, "application/json", body, ("Cache-Control", "no-store"))


def _header(headers: Iterable[tuple[str, str]], name: str) -> str | None:
    return next((v for k, v in headers if k.lower() == name), None)


_NOT_FOUND = HttpError(404, "not_found", "not found")


class ConsoleSite:
    """Answers the paths of ``engram serve`` outside ``/v1`` (see the module docstring)."""

    def __init__(self, settings: Settings, signer: TokenSigner, root: Path | None = None) -> None:
        self.settings = settings
        self.signer = signer
        self.root = (root if root is not None else console_dir(settings)).resolve()

    @property
    def built(self) -> bool:
        return (self.root / "index.html").is_file()

    @staticmethod
    def serves(path: str) -> bool:
        """Whether ``path`` is the console's (everything outside the API's ``/v1``)."""
        return path != "/v1" and not path.startswith("/v1/")

    def handle(
        self,
        method: str,
        target: str,
        headers: list[tuple[str, str]],
        body: bytes,
        source_ip: str,
    ) -> HttpResult:
        path = urlsplit(target).path or "/"
        if path == DEV_SIGN_IN_PATH:
            if not (is_loopback(source_ip) and is_loopback_host(_header(headers, "host"))):
                return error_result(_NOT_FOUND)
            if method != "POST":
                return self._not_allowed(method, "POST")
            return self.sign_in(headers, body)
        if method not in ("GET", "HEAD"):
            return self._not_allowed(method, "GET, HEAD")
        if path == CONFIG_PATH:
            return _json(200, {"apiUrl": "", "auth": {"mode": "dev"}})
        return self.static(path)

    @staticmethod
    def _not_allowed(method: str, allow: str) -> HttpResult:
        message = f"{method} is not allowed here; allowed: {allow}"
        err = HttpError(405, "method_not_allowed", message, headers={"Allow": allow})
        return error_result(err)

    def sign_in(self, headers: list[tuple[str, str]], body: bytes) -> HttpResult:
        """A dev token for the user and team the body names (422 naming a bad field)."""
        media = (_header(headers, "content-type") or "").split(";", 1)[0].strip().lower()
        if media != "application/json":
            message = "Content-Type must be application/json"
            return error_result(HttpError(415, "unsupported_media_type", message))
        try:
            request = DevSignIn.model_validate_json(body or b"{}")
        except ValidationError as exc:
            return error_result(error_response(exc))
        token = self.signer.issue(
            request.user,
            request.team,
            admin=request.admin,
            team_admin=request.team_admin,
            ttl_s=DEV_TOKEN_TTL_S,
        )
        return _json(200, {"idToken": token, "expiresIn": DEV_TOKEN_TTL_S})

    def static(self, path: str) -> HttpResult:
        """A file of the build, else ``index.html`` for a console route, else 404."""
        if not self.built:
            return _result(404, "text/html; charset=utf-8", NOT_BUILT_PAGE.encode("utf-8"))
        name = unquote(path)
        parts = [p for p in name.split("/") if p]
        if "\x00" in name or "\\" in name or any(p in (".", "..") for p in parts):
            return error_result(_NOT_FOUND)
        file = self.root.joinpath(*parts).resolve() if parts else self.root / "index.html"
        if not file.is_relative_to(self.root):
            return error_result(_NOT_FOUND)
        if not file.is_file():
            if parts and "." in parts[-1]:
                return error_result(_NOT_FOUND)  # a missing asset, not a console route
            file = self.root / "index.html"
        hashed = parts[:1] == ["assets"] and file.name != "index.html"
        cache = "public, max-age=31536000, immutable" if hashed else "no-cache"
        return _result(200, content_type(file), file.read_bytes(), ("Cache-Control", cache))
