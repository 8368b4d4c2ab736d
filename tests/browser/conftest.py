"""Fixtures of the browser tier: Debian's Chromium driven by Playwright, headless.

Playwright launches ``/usr/bin/chromium`` through ``executable_path``; it never downloads a
browser (``playwright install`` is never run). A machine without that Chromium fails these
tests — install it with ``apt-get install chromium`` (``.ci/run`` does) — they are never skipped.
Screenshots go to ``build/screenshots/`` (``make screenshots`` copies them to docs/console/).
"""

from __future__ import annotations

import os
from collections.abc import Iterator
from pathlib import Path

import pytest
from playwright.sync_api import Browser, BrowserContext, Playwright, sync_playwright

REPO = Path(__file__).resolve().parents[2]
CHROMIUM = Path("/usr/bin/chromium")
SCREENSHOTS = REPO / "build" / "screenshots"
#: The widths every page is checked and photographed at: a desktop and a phone.
WIDTHS = {"desktop": 1280, "phone": 375}


def pytest_collection_modifyitems(items: list[pytest.Item]) -> None:
    for item in items:
        if "tests/browser/" in str(item.path).replace(os.sep, "/"):
            item.add_marker(pytest.mark.browser)


# Playwright's sync API runs an asyncio loop on the main thread while it is open, and
# asyncio.run() refuses to start inside one: it lives for one test module at a time, so the
# tiers collected after this one (their asyncio tests) never meet it.
@pytest.fixture(scope="module")
def playwright() -> Iterator[Playwright]:
    with sync_playwright() as p:
        yield p


@pytest.fixture(scope="module")
def browser(playwright: Playwright) -> Iterator[Browser]:
    if not os.access(CHROMIUM, os.X_OK):
        pytest.fail(
            f"{CHROMIUM} is missing: the browser tests drive Debian's Chromium "
            "(apt-get install chromium); they never download one"
        )
    browser = playwright.chromium.launch(executable_path=str(CHROMIUM), headless=True)
    try:
        yield browser
    finally:
        browser.close()


@pytest.fixture
def context(browser: Browser) -> Iterator[BrowserContext]:
    """A fresh browser profile (no cookies, no storage) at desktop width."""
    ctx = browser.new_context(viewport={"width": WIDTHS["desktop"], "height": 900})
    try:
        yield ctx
    finally:
        ctx.close()
