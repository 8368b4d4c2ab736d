"""Fixtures of the browser tier: Debian's Chromium driven by Playwright, headless.

Playwright launches ``/usr/bin/chromium`` through ``executable_path``; it never downloads a
browser (``playwright install`` is never run). A machine without that Chromium fails these
tests — install it with ``apt-get install chromium`` (``.ci/run`` does) — they are never skipped.
Screenshots go to ``build/screenshots/`` (``make screenshots`` copies them to docs/console/).

``engram`` is one ``engram serve`` for the session (tests/e2e/harness.py: a free port, a temporary
data dir, a redis-server of its own) serving console/dist, built once first (``npm ci``,
``npm run build``; skipped when the build is newer than every file of console/). Tests isolate
themselves with fresh user and team ids. A test that needs the service configured otherwise
asks ``engram_with(ENGRAM_EMBEDDER="local")``: another such service with those variables, started
on first use and shared by every test that asks for the same ones; ``engram`` is unchanged.
"""

from __future__ import annotations

import asyncio
import contextlib
import os
import shutil
import subprocess
from collections.abc import Callable, Iterator
from pathlib import Path

import pytest
from playwright.sync_api import Browser, BrowserContext, Playwright, sync_playwright
from tests.browser.ui import REPO, WIDTHS
from tests.e2e.harness import LocalEngram, run_local_service
from tests.support.services import redis_server

CHROMIUM = Path("/usr/bin/chromium")


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
    asyncio.run(asyncio.sleep(0))  # fails here, not in a later tier, if the loop outlived it


@pytest.fixture(scope="module")
def browser(playwright: Playwright) -> Iterator[Browser]:
    if not os.access(CHROMIUM, os.X_OK):
        pytest.fail(
            f"{CHROMIUM} is missing: the browser tests drive Debian's Chromium "
            "(apt-get install chromium); they never download one"
        )
    browser = playwright.chromium.launch(executable_path=str(CHROMIUM), headless=True)
    version = subprocess.run(
        [str(CHROMIUM), "--version"], capture_output=True, text=True, timeout=60, check=True
    ).stdout
    assert browser.version in version, (browser.version, version)  # Debian's, none other
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


# --- the console and the service ----------------------------------------------------------
CONSOLE = REPO / "console"
DIST = CONSOLE / "dist"
_NOT_SOURCES = ("node_modules", "dist", "dist-aws")


def console_is_stale() -> bool:
    """No build, or a file of console/ (but its packages and builds) newer than it."""
    index = DIST / "index.html"
    if not index.is_file():
        return True
    built = index.stat().st_mtime
    for path in CONSOLE.rglob("*"):
        parts = path.relative_to(CONSOLE).parts
        if parts[0] in _NOT_SOURCES:
            continue
        if path.is_file() and path.stat().st_mtime > built:
            return True
    return False


def build_console() -> Path:
    """console/dist, built once with the locked packages (``npm ci``, ``npm run build``)
    unless it is up to date, as ``make setup`` builds it."""
    if not (CONSOLE / "package.json").is_file():
        pytest.fail(f"{CONSOLE} has no package.json: the browser tests drive the console")
    if not console_is_stale():
        return DIST
    npm = shutil.which("npm")
    if npm is None:
        pytest.fail("npm is missing: the browser tests build the console (Node.js 20.19+)")
    for args in ([npm, "ci", "--no-audit", "--no-fund", "--prefer-offline"], [npm, "run", "build"]):
        done = subprocess.run(
            args, cwd=CONSOLE, capture_output=True, text=True, timeout=600, check=False
        )
        if done.returncode != 0:
            pytest.fail(f"{' '.join(args[1:])} failed in console/:\n{done.stdout}\n{done.stderr}")
    return DIST


@pytest.fixture(scope="session")
def console_dist() -> Path:
    return build_console()


@contextlib.contextmanager
def serve_console(console_dist: Path, env: dict[str, str]) -> Iterator[LocalEngram]:
    """``engram serve`` on a free port and a temporary data dir, serving the built console,
    on a redis-server of its own, with ``env`` added to its environment; the maintenance timer
    runs every second."""
    extra = {"ENGRAM_CONSOLE_DIR": str(console_dist), **env}
    with (
        redis_server() as server,
        run_local_service(server.url, redis_admin_url=server.admin_url, extra_env=extra) as svc,
    ):
        yield svc


@pytest.fixture(scope="session")
def engram(console_dist: Path) -> Iterator[LocalEngram]:
    """The service most tests share: ``serve_console`` with no variable of its own."""
    with serve_console(console_dist, {}) as svc:
        yield svc


@pytest.fixture(scope="session")
def engram_with(console_dist: Path) -> Iterator[Callable[..., LocalEngram]]:
    """``engram_with(**env)``: a service as ``engram`` with ``env`` added to its environment
    (``ENGRAM_EMBEDDER="local"``: the offline embedder, so duplicates are flagged). Each set of
    variables starts one service on first use, shared for the rest of the session."""
    started: dict[tuple[tuple[str, str], ...], LocalEngram] = {}
    with contextlib.ExitStack() as stack:

        def serve(**env: str) -> LocalEngram:
            wanted = tuple(sorted(env.items()))
            if wanted not in started:
                started[wanted] = stack.enter_context(serve_console(console_dist, env))
            return started[wanted]

        yield serve
