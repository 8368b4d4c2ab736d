"""What the browser tests do in the console, by the names console/README.md ("For tests")
promises: signing in with the dev sign-in, the network log of a page, the API calls that
prepare a user's data (events that become facts, saved memories, transcripts that become
pending proposals), the axe-core check, and screenshots at both widths."""

from __future__ import annotations

import json
import re
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from axe_playwright_python.sync_playwright import Axe
from playwright.sync_api import Browser, BrowserContext, Page, Response, expect
from tests.e2e.harness import LocalEngram, Tenant, eventually

from engram.client import EngramClient

REPO = Path(__file__).resolve().parents[2]
SCREENSHOTS = REPO / "build" / "screenshots"
#: The widths every page is checked and photographed at: a desktop and a phone.
WIDTHS = {"desktop": 1280, "phone": 375}


#: axe-core's impacts that fail a page (moderate and minor ones are reported by axe only).
BLOCKING = ("serious", "critical")
AXE = Axe()


def assert_accessible(page: Page, what: str) -> None:
    """axe-core over the page as it is now: no serious or critical violation."""
    results = AXE.run(page)
    blocking = [v for v in results.response["violations"] if v["impact"] in BLOCKING]
    report = [
        f"{v['impact']} {v['id']}: {v['help']} at {[n['target'] for n in v['nodes']][:5]}"
        for v in blocking
    ]
    assert report == [], f"{what}:\n" + "\n".join(report)


def open_context(browser: Browser, width: str = "desktop") -> BrowserContext:
    """A fresh profile (its own sessionStorage, so its own sign-in) at one of ``WIDTHS``."""
    return browser.new_context(
        viewport={"width": WIDTHS[width], "height": 900}, accept_downloads=True
    )


def sign_in(
    page: Page,
    engram: LocalEngram,
    user: str,
    team: str,
    *,
    admin: bool = False,
    team_admin: bool = False,
    route: str = "/#/",
) -> None:
    """The dev sign-in form, then wait until the console shows who is signed in."""
    page.goto(f"{engram.url}{route}")
    form = page.get_by_role("form", name="Dev sign-in")
    form.get_by_label("User id").fill(user)
    form.get_by_label("Team id").fill(team)
    if admin:
        form.get_by_label("Global admin").check()
    if team_admin:
        form.get_by_label("Team admin").check()
    form.get_by_role("button", name="Sign in").click()
    expect(page.get_by_text(re.compile(rf"Signed in as {re.escape(user)}\b"))).to_be_visible()


def nav(page: Page, name: str) -> None:
    page.get_by_role("navigation", name="Pages").get_by_role("link", name=name).click()


def stored_token(page: Page) -> str:
    """The token the console keeps for the signed-in tab."""
    raw = page.evaluate("() => sessionStorage.getItem('engram.console.tokens')")
    token: str = json.loads(raw)["idToken"]
    return token


def fetch(page: Page, method: str, path: str, token: str, body: Any = None) -> int:
    """The status of a request made from the page itself, as a person could type it into the
    browser's console."""
    status: int = page.evaluate(
        """async ([method, path, token, body]) => {
            const init = {method, headers: {Authorization: `Bearer ${token}`}};
            if (body !== null) {
                init.body = JSON.stringify(body);
                init.headers["Content-Type"] = "application/json";
            }
            return (await fetch(path, init)).status;
        }""",
        [method, path, token, body],
    )
    return status


@dataclass
class NetworkLog:
    """Every response the page received from the API (``/v1/``), bodies read on demand."""

    responses: list[Response] = field(default_factory=list)

    @classmethod
    def of(cls, page: Page) -> NetworkLog:
        log = cls()
        page.on("response", lambda r: log.responses.append(r) if "/v1/" in r.url else None)
        return log

    def bodies(self) -> list[tuple[str, int, str]]:
        out = []
        for response in self.responses:
            try:
                text = response.text()
            except Exception:  # a body the browser no longer holds (e.g. a redirect) has none
                text = ""
            out.append((response.url, response.status, text))
        return out


# --- data made through the API, as an assistant's backend makes it -------------------------
def user_client(engram: LocalEngram, user: str, team: str, **kwargs: Any) -> EngramClient:
    return engram.user_client(user, team, **kwargs)


def facts_from_events(engram: LocalEngram, tenant: Tenant, user: str | None = None) -> list[Any]:
    """Events a chat backend posts (a query, tool calls); a session start consolidates them
    into facts. Returns the facts once they show (bounded wait)."""
    client = user_client(engram, user or tenant.user, tenant.team)
    client.post_events(
        [
            {"kind": "query", "text": "royalty report for Acme"},
            {"kind": "tool", "toolName": "get_account", "ok": True, "durationMs": 40},
            {"kind": "tool", "toolName": "get_account", "ok": True, "durationMs": 50},
        ]
    )

    def probe() -> list[Any] | None:
        facts = client.start_session()["facts"]
        subjects = {f["subject"] for f in facts}
        return facts if "tool_affinity:get_account" in subjects else None

    return eventually(probe, timeout_s=60, every_s=0.5)


def pending_proposals(
    engram: LocalEngram, tenant: Tenant, sentences: dict[str, str]
) -> dict[str, dict[str, Any]]:
    """``{conversation: sentence}`` sent as the user's transcripts; the maintenance job (every
    second here) proposes a memory from each. Returns ``{conversation: pending memory}``."""
    alice = user_client(engram, tenant.user, tenant.team)
    admin = user_client(engram, tenant.admin, tenant.team, admin=True)
    for conversation, sentence in sentences.items():
        alice.send_transcript(conversation, [{"role": "user", "content": sentence}])

    def probe() -> dict[str, dict[str, Any]] | None:
        queue = {m["sourceChannelId"]: m for m in admin.review_queue()}
        return queue if set(sentences) <= set(queue) else None

    queue = eventually(probe, timeout_s=90, every_s=0.5)
    return {c: queue[c] for c in sentences}


def screenshot(page: Page, name: str, width: str) -> None:
    """The whole page as ``build/screenshots/<name>-<width>.png``."""
    SCREENSHOTS.mkdir(parents=True, exist_ok=True)
    page.screenshot(path=str(SCREENSHOTS / f"{name}-{width}.png"), full_page=True)


def json_of(text: str) -> Any:
    return json.loads(text) if text else None


def open_review(browser: Browser, engram: LocalEngram, tenant: Tenant, width: str) -> Page:
    """The admin's Review page at ``width``, once it lists the tenant's two items."""
    page = open_context(browser, width).new_page()
    sign_in(page, engram, tenant.admin, tenant.team, admin=True)
    nav(page, "Review")
    expect(
        page.get_by_role("list", name="Pending proposals").get_by_role("listitem")
    ).to_have_count(2)
    return page


def photograph(page: Page, name: str) -> None:
    """A state of a page, under the screenshots' ``states/``."""
    path = SCREENSHOTS / "states" / f"{name}.png"
    path.parent.mkdir(parents=True, exist_ok=True)
    page.screenshot(path=str(path), full_page=True)
