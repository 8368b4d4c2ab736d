"""The console beside the API in the local service: ``/config.json``, the dev sign-in (loopback
clients naming a loopback host only; a pydantic-checked body) and the built files with their
content types, the console's routes answered by ``index.html`` and a CSP on every answer.
Driven through ``ConsoleSite`` and ``LocalHTTPServer.answer`` (no sockets)."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import pytest

from engram.local.console import (
    CONTENT_SECURITY_POLICY,
    DEV_TOKEN_TTL_S,
    REPO_CONSOLE_DIR,
    ConsoleSite,
    console_dir,
    is_loopback,
    is_loopback_host,
)
from engram.local.gateway import ApiGatewayEmulator, HttpResult
from engram.local.server import LocalHTTPServer
from engram.local.tokens import TokenSigner
from engram.settings import Settings

SETTINGS = Settings()
JSON = ("Content-Type", "application/json")


@pytest.fixture
def signer(tmp_path: Path) -> TokenSigner:
    return TokenSigner(tmp_path / "data", audience="engram-local", settings=SETTINGS)


@pytest.fixture
def built(tmp_path: Path) -> Path:
    root = tmp_path / "dist"
    (root / "assets").mkdir(parents=True)
    (root / "index.html").write_text("<!doctype html><title>console</title>", encoding="utf-8")
    (root / "assets" / "index-abc123.js").write_text("console.log(1)", encoding="utf-8")
    (root / "assets" / "index-abc123.css").write_text("body{}", encoding="utf-8")
    (root / "favicon.svg").write_text("<svg/>", encoding="utf-8")
    (tmp_path / "secret.txt").write_text("not for the web", encoding="utf-8")
    return root


@pytest.fixture
def site(signer: TokenSigner, built: Path) -> ConsoleSite:
    return ConsoleSite(SETTINGS, signer, root=built)


def header(result: HttpResult, name: str) -> str | None:
    return next((v for k, v in result.headers if k.lower() == name.lower()), None)


def body_json(result: HttpResult) -> Any:
    return json.loads(result.body)


def sign_in(
    site: ConsoleSite,
    body: Any,
    *,
    ip: str = "127.0.0.1",
    host: str = "127.0.0.1:8000",
    headers: list[tuple[str, str]] | None = None,
) -> HttpResult:
    raw = body if isinstance(body, bytes) else json.dumps(body).encode()
    sent = headers if headers is not None else [JSON]
    return site.handle("POST", "/dev/sign-in", [("Host", host), *sent], raw, ip)


def get(site: ConsoleSite, path: str, method: str = "GET") -> HttpResult:
    return site.handle(method, path, [("Host", "127.0.0.1:8000")], b"", "127.0.0.1")


def test_config_json_says_same_origin_api_and_dev_sign_in(site: ConsoleSite):
    result = get(site, "/config.json")
    assert result.status == 200
    assert body_json(result) == {"apiUrl": "", "auth": {"mode": "dev"}}
    assert header(result, "Content-Type") == "application/json"
    assert header(result, "Cache-Control") == "no-store"
    assert header(result, "Content-Security-Policy") == CONTENT_SECURITY_POLICY


@pytest.mark.parametrize(
    ("flags", "groups"),
    [
        ({}, None),
        ({"admin": True}, [SETTINGS.admin_group]),
        ({"teamAdmin": True}, [SETTINGS.team_admin_group]),
        ({"admin": True, "teamAdmin": True}, [SETTINGS.admin_group, SETTINGS.team_admin_group]),
    ],
)
def test_dev_sign_in_issues_a_token_the_api_accepts(
    site: ConsoleSite, signer: TokenSigner, flags: dict[str, bool], groups: list[str] | None
):
    result = sign_in(site, {"user": "alice", "team": "acme", **flags})
    assert result.status == 200, result.body
    answer = body_json(result)
    assert answer["expiresIn"] == DEV_TOKEN_TTL_S
    claims = signer.verify(answer["idToken"])
    assert claims["sub"] == "alice"
    assert claims[SETTINGS.team_claim] == "acme"
    assert claims.get(SETTINGS.groups_claim) == groups
    assert claims["exp"] - claims["iat"] == DEV_TOKEN_TTL_S
    assert header(result, "Cache-Control") == "no-store"


@pytest.mark.parametrize(
    ("body", "field"),
    [
        ({"team": "acme"}, "user"),
        ({"user": "alice"}, "team"),
        ({"user": "alice", "team": "9acme"}, "team"),
        ({"user": "alice", "team": "ac me"}, "team"),
        ({"user": "", "team": "acme"}, "user"),
        ({"user": "a" * 129, "team": "acme"}, "user"),
        ({"user": "service:bot", "team": "acme"}, "user"),
        ({"user": "alice", "team": "acme", "admin": "yes"}, "admin"),
        ({"user": "alice", "team": "acme", "teamAdmin": 1}, "teamAdmin"),
        ({"user": "alice", "team": "acme", "role": "root"}, "role"),
        ({"user": 7, "team": "acme"}, "user"),
    ],
)
def test_a_bad_sign_in_body_is_422_naming_the_field(site: ConsoleSite, body: Any, field: str):
    result = sign_in(site, body)
    assert result.status == 422, result.body
    error = body_json(result)["error"]
    assert error["code"] == "invalid_input"
    assert field in {d["field"] for d in error["details"]}
    assert "idToken" not in result.body.decode()


def test_sign_in_takes_json_only(site: ConsoleSite):
    # a form on another site can post text/plain without a preflight; the sign-in refuses it
    body = json.dumps({"user": "alice", "team": "acme"}).encode()
    result = sign_in(site, body, headers=[("Content-Type", "text/plain")])
    assert result.status == 415
    assert sign_in(site, b"{not json", headers=[JSON]).status == 400
    assert body_json(sign_in(site, b"", headers=[JSON]))["error"]["code"] == "invalid_input"


@pytest.mark.parametrize("ip", ["127.0.0.1", "127.8.9.10", "::1", "::ffff:127.0.0.1"])
def test_loopback_clients_get_a_token(site: ConsoleSite, ip: str):
    assert is_loopback(ip)
    assert sign_in(site, {"user": "alice", "team": "acme"}, ip=ip).status == 200


@pytest.mark.parametrize(
    "ip", ["192.0.2.7", "10.0.0.1", "0.0.0.0", "::ffff:192.0.2.7", "fd00::2", "fe80::1%eth0", ""]
)
def test_any_other_client_gets_the_404_of_a_missing_path(site: ConsoleSite, ip: str):
    assert not is_loopback(ip)
    result = sign_in(site, {"user": "alice", "team": "acme", "admin": True}, ip=ip)
    assert result.status == 404
    assert body_json(result) == {"error": {"code": "not_found", "message": "not found"}}
    # whatever the method: the route does not exist for them
    assert site.handle("GET", "/dev/sign-in", [("Host", "x")], b"", ip).status == 404


@pytest.mark.parametrize(
    ("host", "ok"),
    [
        ("127.0.0.1:8000", True),
        ("localhost:8000", True),
        ("LOCALHOST", True),
        ("[::1]:8000", True),
        ("127.0.0.2", True),
        ("evil.example:8000", False),
        ("evil.example", False),
        ("192.0.2.2:8000", False),
        ("", False),
    ],
)
def test_a_loopback_client_must_name_a_loopback_host(site: ConsoleSite, host: str, ok: bool):
    # a page whose own name resolves to 127.0.0.1 (DNS rebinding) sends its own name as Host
    assert is_loopback_host(host) is ok
    result = sign_in(site, {"user": "alice", "team": "acme"}, host=host)
    assert result.status == (200 if ok else 404)


def test_sign_in_is_post_only(site: ConsoleSite):
    result = get(site, "/dev/sign-in")
    assert result.status == 405
    assert header(result, "Allow") == "POST"


@pytest.mark.parametrize("path", ["/", "/index.html", "/review", "/memory/abc", "/settings/"])
def test_the_console_routes_answer_index_html(site: ConsoleSite, path: str):
    result = get(site, path)
    assert result.status == 200
    assert result.body == b"<!doctype html><title>console</title>"
    assert header(result, "Content-Type") == "text/html; charset=utf-8"
    assert header(result, "Cache-Control") == "no-cache"
    assert header(result, "Content-Security-Policy") == CONTENT_SECURITY_POLICY
    assert header(result, "X-Content-Type-Options") == "nosniff"


@pytest.mark.parametrize(
    ("path", "content_type"),
    [
        ("/assets/index-abc123.js", "text/javascript; charset=utf-8"),
        ("/assets/index-abc123.css", "text/css; charset=utf-8"),
        ("/favicon.svg", "image/svg+xml"),
    ],
)
def test_files_have_their_content_type(site: ConsoleSite, path: str, content_type: str):
    result = get(site, path)
    assert result.status == 200
    assert header(result, "Content-Type") == content_type
    immutable = path.startswith("/assets/")
    expected = "public, max-age=31536000, immutable" if immutable else "no-cache"
    assert header(result, "Cache-Control") == expected


@pytest.mark.parametrize(
    "path",
    [
        "/assets/missing.js",
        "/../secret.txt",
        "/%2e%2e/secret.txt",
        "/assets/..%2f..%2fsecret.txt",
        "/assets/%2e%2e/%2e%2e/secret.txt",
        "/..%5csecret.txt",
        "/index.html%00.js",
    ],
)
def test_a_missing_file_or_a_path_out_of_the_build_is_404(site: ConsoleSite, path: str):
    result = get(site, path)
    assert result.status == 404
    assert b"not for the web" not in result.body


def test_only_get_and_head_read_files(site: ConsoleSite):
    assert get(site, "/", method="POST").status == 405
    assert header(get(site, "/review", method="DELETE"), "Allow") == "GET, HEAD"
    assert get(site, "/", method="HEAD").status == 200


def test_an_unbuilt_console_says_how_to_build_it(signer: TokenSigner, tmp_path: Path):
    site = ConsoleSite(SETTINGS, signer, root=tmp_path / "nowhere")
    assert not site.built
    for path in ("/", "/review"):
        result = get(site, path)
        assert result.status == 404
        page = result.body.decode()
        assert "make setup" in page
        assert "npm ci" in page
        assert "npm run build" in page
    # the config and the sign-in do not need the build
    assert get(site, "/config.json").status == 200
    assert sign_in(site, {"user": "alice", "team": "acme"}).status == 200


def test_the_console_dir_comes_from_settings(tmp_path: Path):
    assert console_dir(Settings()) == REPO_CONSOLE_DIR
    assert console_dir(Settings(console_dir=tmp_path)) == tmp_path
    assert REPO_CONSOLE_DIR.parts[-2:] == ("console", "dist")


def echo(event: dict[str, Any], context: Any) -> dict[str, Any]:
    return {"statusCode": 200, "headers": {"Content-Type": "application/json"}, "body": "{}"}


class Server:
    """``LocalHTTPServer.answer`` over an emulator and the site, without a socket."""

    answer = LocalHTTPServer.answer

    def __init__(self, site: ConsoleSite | None, signer: TokenSigner) -> None:
        routes = {"GET /v1/tools": echo, "POST /mcp": echo, "GET /v1/health": echo}
        public = {"GET /v1/health"}
        self.emulator = ApiGatewayEmulator(
            routes, signer=signer, settings=SETTINGS, public_routes=public
        )
        self.site = site


def test_the_api_keeps_its_paths(site: ConsoleSite, signer: TokenSigner):
    server = Server(site, signer)
    host = [("Host", "127.0.0.1")]
    # API routes are the emulator's: a token is checked, unknown /v1 paths are its JSON 404
    assert server.answer("GET", "/v1/tools", host, b"", "127.0.0.1").status == 401
    assert server.answer("GET", "/v1/health", host, b"", "127.0.0.1").status == 200
    missing = server.answer("GET", "/v1/nothing-here", host, b"", "127.0.0.1")
    assert missing.status == 404
    assert b"console" not in missing.body
    assert server.answer("GET", "/v1", host, b"", "127.0.0.1").status == 404
    assert server.answer("POST", "/mcp", host, b"{}", "127.0.0.1").status == 401
    # a path the API has but not for this method stays the API's 405
    assert server.answer("GET", "/mcp", host, b"", "127.0.0.1").status == 405
    # everything else is the console's
    assert server.answer("GET", "/review", host, b"", "127.0.0.1").body.startswith(b"<!doctype")
    assert server.answer("GET", "/config.json", host, b"", "127.0.0.1").status == 200


def test_without_the_site_there_is_no_console_and_no_sign_in(signer: TokenSigner):
    server = Server(None, signer)
    host = [("Host", "127.0.0.1"), JSON]
    body = json.dumps({"user": "alice", "team": "acme"}).encode()
    assert server.answer("POST", "/dev/sign-in", host, body, "127.0.0.1").status == 404
    assert server.answer("GET", "/config.json", host, b"", "127.0.0.1").status == 404
