"""axe-core over every page of the console in each of its states — empty, loaded, and the API
answering 503 (degraded), 429 (with its wait) and 401 (sign in again) — at desktop and phone
width: no serious or critical violation. Each page's loaded state is photographed at both
widths as ``build/screenshots/<page>-<width>.png`` (``make screenshots`` commits them under
docs/console/); the other states go to ``build/screenshots/states/``.

axe-core is the ``axe.min.js`` that the ``axe-playwright-python`` package bundles (pinned in
uv.lock), evaluated in the page through the DevTools protocol, so the console's content
security policy stays on."""

from __future__ import annotations

import json
import re
from collections.abc import Callable, Iterator
from dataclasses import dataclass
from typing import Any

import pytest
from playwright.sync_api import Browser, Page, Route, expect
from tests.browser.ui import (
    SCREENSHOTS,
    WIDTHS,
    assert_accessible,
    facts_from_events,
    nav,
    open_context,
    pending_proposals,
    sign_in,
    user_client,
)
from tests.e2e.harness import LocalEngram, Tenant

#: The console's pages (each photographed at every width of ``WIDTHS``).
PAGES = ("sign-in", "my-memory", "review", "settings")
SLOW = 30_000  # ms: the client retries 503s before the page shows the error

#: How the API answers in each error state, and what the page then says.
ERRORS: dict[str, tuple[int, dict[str, str], dict[str, Any], str]] = {
    "degraded": (
        503,
        {"Retry-After": "1"},
        {"error": {"code": "unavailable", "message": "Redis is unavailable"}},
        "Engram is degraded",
    ),
    "rate-limited": (
        429,
        {"Retry-After": "30"},
        {"error": {"code": "rate_limited", "message": "too many requests"}},
        "Wait 30 seconds",
    ),
    "signed-out": (
        401,
        {"WWW-Authenticate": "Bearer"},
        {"error": {"code": "unauthorized", "message": "token expired"}},
        "Sign in again",
    ),
}


def photograph(page: Page, name: str) -> None:
    """``name`` is ``<page>-<width>`` for a page's loaded state, else ``states/<...>``."""
    path = SCREENSHOTS / f"{name}.png"
    path.parent.mkdir(parents=True, exist_ok=True)
    page.screenshot(path=str(path), full_page=True)


def fail_api(page: Page, state: str) -> None:
    status, headers, body, _ = ERRORS[state]

    def answer(route: Route) -> None:
        route.fulfill(
            status=status,
            headers={**headers, "Content-Type": "application/json"},
            body=json.dumps(body),
        )

    page.unroute("**/v1/**")
    page.route("**/v1/**", answer)


@dataclass(frozen=True)
class Teams:
    empty: Tenant
    loaded: Tenant


@pytest.fixture(scope="module")
def teams(engram: LocalEngram) -> Teams:
    """A team with nothing yet, and one with facts, memories, pending proposals, a persona
    and retention rules."""
    empty, loaded = engram.tenant(), engram.tenant()
    facts_from_events(engram, loaded)
    alice = user_client(engram, loaded.user, loaded.team)
    alice.save("favourite_report", "quarterly royalty statement, PDF")
    alice.save("timezone", "Europe/Paris", source_channel_id="conv-setup")
    pending_proposals(
        engram,
        loaded,
        {"conv-a": "My favourite editor is helix.", "conv-b": "I live in Lisbon."},
    )
    admin = user_client(engram, loaded.admin, loaded.team, admin=True)
    admin.put_persona("helpdesk", memory_enabled=True, allowed_groups=["support"])
    headers = engram.headers(engram.token(loaded.admin, loaded.team, admin=True))
    with engram.http() as http:
        response = http.put(
            "/v1/settings/team",
            json={
                "memoryEnabled": True,
                "retention": {"archiveAfterDays": 90, "deleteArchivedAfterDays": 365},
            },
            headers=headers,
        )
        assert response.status_code == 200, response.text
    return Teams(empty=empty, loaded=loaded)


@dataclass(frozen=True)
class PageCase:
    route: str
    admin: bool
    loaded: Callable[[Page], None]
    empty: Callable[[Page], None]


def my_memory_loaded(page: Page) -> None:
    expect(page.get_by_role("list", name="Memories")).to_be_visible()
    expect(page.get_by_role("list", name="Learnt facts")).to_be_visible()


def my_memory_empty(page: Page) -> None:
    expect(page.get_by_text(re.compile("^No memories yet"))).to_be_visible()
    expect(page.get_by_text(re.compile("^Engram has not learnt anything"))).to_be_visible()


def review_loaded(page: Page) -> None:
    expect(
        page.get_by_role("list", name="Pending proposals").get_by_role("listitem")
    ).to_have_count(2)


def review_empty(page: Page) -> None:
    expect(page.get_by_text(re.compile("^Nothing to review"))).to_be_visible()


def settings_loaded(page: Page) -> None:
    expect(page.get_by_role("form", name="Persona helpdesk")).to_be_visible()
    expect(page.get_by_role("form", name="Team settings")).to_be_visible()


def settings_empty(page: Page) -> None:
    expect(page.get_by_text("No persona is configured yet")).to_be_visible()


CASES = {
    "my-memory": PageCase("/#/", False, my_memory_loaded, my_memory_empty),
    "review": PageCase("/#/review", True, review_loaded, review_empty),
    "settings": PageCase("/#/settings", True, settings_loaded, settings_empty),
}


@pytest.fixture(params=list(WIDTHS))
def width(request: pytest.FixtureRequest) -> str:
    return str(request.param)


@pytest.fixture
def pages(browser: Browser, width: str) -> Iterator[Callable[[], Page]]:
    """New pages, each in a fresh profile; at the end, none may have met an uncaught script
    error or a content security policy violation."""
    contexts = []
    problems: list[str] = []

    def new() -> Page:
        context = open_context(browser, width)
        contexts.append(context)
        page = context.new_page()
        page.on("pageerror", lambda error: problems.append(f"uncaught: {error}"))
        page.on(
            "console",
            lambda m: problems.append(m.text) if "Content Security Policy" in m.text else None,
        )
        return page

    yield new
    for context in contexts:
        context.close()
    assert problems == []


def test_sign_in_page(pages: Callable[[], Page], engram: LocalEngram, width: str):
    page = pages()
    page.goto(f"{engram.url}/#/")
    form = page.get_by_role("form", name="Dev sign-in")
    expect(form).to_be_visible()
    assert_accessible(page, f"sign-in, empty, {width}")
    photograph(page, f"sign-in-{width}")
    form.get_by_label("User id").fill("alice")
    form.get_by_label("Team id").fill("acme")
    form.get_by_label("Global admin").check()
    assert_accessible(page, f"sign-in, filled in, {width}")
    page.route(
        "**/dev/sign-in",
        lambda route: route.fulfill(
            status=503,
            headers={"Content-Type": "application/json", "Retry-After": "1"},
            body=json.dumps({"error": {"code": "unavailable", "message": "try later"}}),
        ),
    )
    form.get_by_role("button", name="Sign in").click()
    expect(page.get_by_role("alert")).to_contain_text("refused")
    assert_accessible(page, f"sign-in, refused, {width}")
    photograph(page, f"states/sign-in-refused-{width}")


@pytest.mark.parametrize("name", list(CASES))
def test_page_in_every_state(
    pages: Callable[[], Page], engram: LocalEngram, teams: Teams, width: str, name: str
):
    case = CASES[name]
    empty = pages()
    sign_in(empty, engram, *_who(teams.empty, case.admin), admin=case.admin)
    empty.goto(f"{engram.url}{case.route}")
    case.empty(empty)
    assert_accessible(empty, f"{name}, empty, {width}")
    photograph(empty, f"states/{name}-empty-{width}")

    page = pages()
    sign_in(page, engram, *_who(teams.loaded, case.admin), admin=case.admin)
    if case.route != "/#/":
        nav(page, "Review" if name == "review" else "Settings")
    case.loaded(page)
    page.wait_for_timeout(200)  # let the last bars and counters settle for the picture
    assert_accessible(page, f"{name}, loaded, {width}")
    photograph(page, f"{name}-{width}")

    for state, (_, _, _, says) in ERRORS.items():
        fail_api(page, state)
        page.reload()
        expect(page.get_by_role("alert").filter(has_text=says).first).to_be_visible(timeout=SLOW)
        assert_accessible(page, f"{name}, {state}, {width}")
        photograph(page, f"states/{name}-{state}-{width}")


def _who(tenant: Tenant, admin: bool) -> tuple[str, str]:
    return (tenant.admin if admin else tenant.user, tenant.team)


def test_the_check_fails_on_a_serious_violation(browser: Browser):
    # a button without a name and an image without alt text: axe finds them, the check fails
    page = browser.new_page()
    try:
        page.set_content('<html lang="en"><title>t</title><main><button></button></main></html>')
        with pytest.raises(AssertionError, match="button-name"):
            assert_accessible(page, "a page with a nameless button")
    finally:
        page.close()
