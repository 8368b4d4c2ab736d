"""The console of the local service over real sockets: bound to every interface, it serves the
built files to anyone who can reach it, but the dev sign-in answers only a loopback client —
the same request through this machine's own non-loopback address gets a 404."""

from __future__ import annotations

import contextlib
import json
import socket
import subprocess
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import httpx
import pytest

from engram.local.console import CONTENT_SECURITY_POLICY
from engram.local.server import LocalService
from engram.local.tokens import TokenSigner
from engram.settings import Settings

pytestmark = pytest.mark.integration


def health(event: dict[str, Any], context: Any) -> dict[str, Any]:
    return {"statusCode": 200, "headers": {"Content-Type": "application/json"}, "body": "{}"}


def non_loopback_address() -> str:
    """An IPv4 address of this machine that is not 127.0.0.0/8 (the source address the
    kernel picks for an outbound route; nothing is sent), else one the host name resolves to."""
    found: list[str] = []
    for target in ("192.0.2.1", "198.51.100.1", "10.255.255.255"):
        with contextlib.suppress(OSError), socket.socket(socket.AF_INET, socket.SOCK_DGRAM) as s:
            s.connect((target, 9))
            found.append(s.getsockname()[0])
    with contextlib.suppress(OSError):
        for info in socket.getaddrinfo(socket.gethostname(), None, socket.AF_INET):
            found.append(str(info[4][0]))
    with contextlib.suppress(OSError, subprocess.SubprocessError):
        out = subprocess.run(
            ["hostname", "-I"], capture_output=True, text=True, timeout=5, check=False
        ).stdout
        found.extend(out.split())
    for address in found:
        if "." in address and not address.startswith("127.") and address != "0.0.0.0":
            return address
    raise AssertionError(f"this machine has no non-loopback IPv4 address (found {found})")


@pytest.fixture
def service(tmp_path: Path) -> Iterator[LocalService]:
    dist = tmp_path / "dist"
    dist.mkdir()
    (dist / "index.html").write_text("<!doctype html><title>console</title>", encoding="utf-8")
    settings = Settings(data_dir=tmp_path / "data", console_dir=dist)
    svc = LocalService(
        {"GET /v1/health": health},
        settings=settings,
        host="0.0.0.0",
        port=0,
        public_routes={"GET /v1/health"},
        console=True,
    ).start()
    try:
        yield svc
    finally:
        svc.stop(timeout=5)


def sign_in(base: str, **headers: str) -> httpx.Response:
    body = {"user": "alice", "team": "acme", "admin": True}
    return httpx.post(f"{base}/dev/sign-in", json=body, headers=headers, timeout=10)


def test_the_dev_sign_in_answers_loopback_only(service: LocalService):
    port = service.httpd.server_address[1]
    outside = non_loopback_address()
    loopback, remote = f"http://127.0.0.1:{port}", f"http://{outside}:{port}"

    ok = sign_in(loopback)
    assert ok.status_code == 200, ok.text
    claims = TokenSigner(
        service.settings.data_dir, audience=service.settings.local_audience
    ).verify(ok.json()["idToken"])
    assert claims["sub"] == "alice"
    assert service.settings.admin_group in claims[service.settings.groups_claim]

    refused = sign_in(remote)
    assert refused.status_code == 404
    assert refused.json() == {"error": {"code": "not_found", "message": "not found"}}
    assert "idToken" not in refused.text
    # a Host header naming the loopback does not make a remote client one
    assert sign_in(remote, Host=f"127.0.0.1:{port}").status_code == 404
    assert httpx.get(f"{remote}/dev/sign-in", timeout=10).status_code == 404

    # the console itself and its config are served on every interface
    for base in (loopback, remote):
        page = httpx.get(f"{base}/review", timeout=10)
        assert page.status_code == 200
        assert page.headers["content-type"] == "text/html; charset=utf-8"
        assert page.headers["content-security-policy"] == CONTENT_SECURITY_POLICY
        config = httpx.get(f"{base}/config.json", timeout=10)
        assert json.loads(config.content) == {"apiUrl": "", "auth": {"mode": "dev"}}
        assert httpx.get(f"{base}/v1/health", timeout=10).status_code == 200
