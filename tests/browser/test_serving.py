"""The local service serves a page the way the console needs it, in a real Chromium: its own
scripts and styles load under the content security policy (an inline script does not run),
the page reads ``/config.json``, gets a token from the dev sign-in and calls the API with it.
The page is a small one of this tier's (tests/browser/site), served by ``LocalService``."""

from __future__ import annotations

import json
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest
from playwright.sync_api import BrowserContext, expect

from engram.api.identity import caller_from_event
from engram.local.console import CONTENT_SECURITY_POLICY
from engram.local.server import LocalService
from engram.settings import Settings

SITE = Path(__file__).parent / "site"


def whoami(event: dict[str, Any], context: Any) -> dict[str, Any]:
    caller = caller_from_event(event)
    body = {"user": caller.user_id, "team": caller.team_id, "admin": caller.is_admin}
    return {
        "statusCode": 200,
        "headers": {"Content-Type": "application/json"},
        "body": json.dumps(body),
    }


@pytest.fixture
def served(tmp_path: Path) -> Iterator[str]:
    settings = Settings(data_dir=tmp_path / "data", console_dir=SITE)
    service = LocalService(
        {"GET /v1/whoami": whoami}, settings=settings, port=0, console=True
    ).start()
    try:
        yield service.url
    finally:
        service.stop(timeout=5)


def test_a_page_signs_in_and_calls_the_api_under_the_csp(context: BrowserContext, served: str):
    page = context.new_page()
    violations: list[str] = []
    page.on(
        "console", lambda m: violations.append(m.text) if "Content Security" in m.text else None
    )
    response = page.goto(f"{served}/some/console/route")
    assert response is not None
    assert response.status == 200
    assert response.headers["content-security-policy"] == CONTENT_SECURITY_POLICY
    expect(page.get_by_role("heading", name="Serving check")).to_be_visible()
    expect(page.locator("#config")).to_have_text('dev api=""')
    expect(page.locator("#who")).to_have_text("smoke (3600s)")
    expect(page.locator("#api")).to_have_text(
        '200 {"user": "smoke", "team": "acme", "admin": false}'
    )
    # the stylesheet of the same origin applied; the inline script was refused
    margin = page.evaluate("getComputedStyle(document.body).marginTop")
    assert margin == "32px"
    expect(page.locator("#inline")).to_have_text("refused")
    assert any("inline script" in v for v in violations), violations
