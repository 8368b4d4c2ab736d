"""A memory's history in Chromium against ``engram serve``: a memory saved, then changed twice
through the API (once as itself, once naming MCP as its surface), shows each version with what
changed from the one before (struck through and marked, and said in words), its status, who
made it as what and through what, and while it was current — a page of versions at a time.
Restoring version 1 makes its key and value current again as a new version made through the
console, and a restore on a version that changed meanwhile is a conflict, not an overwrite.
axe-core finds nothing serious on the view."""

from __future__ import annotations

import json
import re
from typing import Any

from playwright.sync_api import Browser, Locator, Page, Route, expect
from tests.browser.ui import SCREENSHOTS, assert_accessible, open_context, sign_in
from tests.e2e.harness import LocalEngram, Tenant

HISTORY = re.compile(r"/v1/memories/[^/]+/history\?")
FIRST = ("favourite_report", "quarterly royalty statement, PDF")
SECOND = ("favourite_report", "quarterly sales statement, PDF")
THIRD = ("preferred_report", "monthly sales statement, PDF")


def write(
    engram: LocalEngram,
    tenant: Tenant,
    method: str,
    path: str,
    body: dict[str, Any],
    **headers: str,
) -> dict[str, Any]:
    """A call of the API as the tenant's user, as an assistant's backend makes it."""
    token = engram.token(tenant.user, tenant.team)
    with engram.http() as http:
        response = http.request(method, path, json=body, headers=engram.headers(token, **headers))
    assert response.status_code in (200, 201), response.text
    answer: dict[str, Any] = response.json()
    return answer


def history_of(engram: LocalEngram, tenant: Tenant, memory_id: str) -> dict[str, Any]:
    token = engram.token(tenant.user, tenant.team)
    with engram.http() as http:
        response = http.get(f"/v1/memories/{memory_id}/history", headers=engram.headers(token))
    assert response.status_code == 200, response.text
    history: dict[str, Any] = response.json()
    return history


def pages_of_two(route: Route) -> None:
    """The console's history requests, two versions a page (so paging shows at 3 versions)."""
    route.continue_(url=re.sub(r"limit=\d+", "limit=2", route.request.url))


def version(history: Locator, label: str, number: int) -> Locator:
    versions = history.get_by_role("list", name=f"Versions of {label}")
    return versions.get_by_role("listitem", name=f"Version {number}", exact=True)


def key_of(item: Locator) -> Locator:
    """What a version shows as its key (with what changed from the version before)."""
    return item.locator("dl dd").nth(0)


def value_of(item: Locator) -> Locator:
    return item.locator("dl dd").nth(1)


def photograph(page: Page, name: str) -> None:
    path = SCREENSHOTS / "states" / f"{name}.png"
    path.parent.mkdir(parents=True, exist_ok=True)
    page.screenshot(path=str(path), full_page=True)


def test_a_user_sees_each_version_and_restores_one(browser: Browser, engram: LocalEngram):
    tenant = engram.tenant()
    saved = write(engram, tenant, "POST", "/v1/memories", {"key": FIRST[0], "value": FIRST[1]})
    memory_id = saved["id"]
    path = f"/v1/memories/{memory_id}"
    write(engram, tenant, "PATCH", path, {"value": SECOND[1]})
    write(
        engram,
        tenant,
        "PATCH",
        path,
        {"key": THIRD[0], "value": THIRD[1]},
        **{"X-Engram-Surface": "mcp"},
    )

    context = open_context(browser)
    page = context.new_page()
    page.route(HISTORY, pages_of_two)
    sign_in(page, engram, tenant.user, tenant.team)
    memories = page.get_by_role("list", name="Memories")
    item = memories.get_by_role("listitem", name=f"Memory {THIRD[0]}")
    expect(item).to_contain_text(THIRD[1])
    item.get_by_role("button", name=f"History of {THIRD[0]}").click()
    history = item.get_by_role("region", name=f"History of {THIRD[0]}")

    # a page of two versions, then the next
    first = version(history, THIRD[0], 1)
    expect(first).to_contain_text("Created.")
    expect(key_of(first)).to_have_text(FIRST[0])
    expect(value_of(first)).to_have_text(FIRST[1])
    expect(first).to_contain_text(f"By {tenant.user}, as the user")
    expect(first).to_contain_text("through the API")
    expect(first).to_contain_text("Active")
    expect(first).to_contain_text(re.compile(r"Current from .+ until .+"))
    expect(version(history, THIRD[0], 3)).to_have_count(0)
    history.get_by_role("button", name=f"Show later versions of {THIRD[0]}").click()

    # version 2: the value's one word changed, struck through and marked, said in words
    second = version(history, THIRD[0], 2)
    expect(second).to_contain_text("Changes from version 1")
    expect(key_of(second)).to_have_text(FIRST[0])
    expect(value_of(second)).to_have_text(
        "quarterly [removed: royalty][added: sales] statement, PDF"
    )
    expect(second.locator("del")).to_have_text("[removed: royalty]")
    expect(second.locator("ins")).to_have_text("[added: sales]")
    assert second.locator("del").evaluate("e => getComputedStyle(e).textDecorationLine") == (
        "line-through"
    )
    expect(second).to_contain_text("through the API")
    expect(second.get_by_role("button", name="Restore version 2")).to_be_visible()

    # version 3: key and value changed, through MCP; the current one has no Restore
    third = version(history, THIRD[0], 3)
    expect(key_of(third)).to_have_text(f"[removed: {FIRST[0]}][added: {THIRD[0]}]")
    expect(value_of(third)).to_have_text(
        "[removed: quarterly][added: monthly] sales statement, PDF"
    )
    expect(third).to_contain_text(f"By {tenant.user}, as the user")
    expect(third).to_contain_text("through MCP")
    expect(third).to_contain_text("Current")
    expect(third).to_contain_text("(still current)")
    expect(third.get_by_role("button", name=re.compile("^Restore"))).to_have_count(0)
    expect(history.get_by_role("button", name=re.compile("^Show later versions"))).to_have_count(0)
    # the review and edit actions are still listed below the versions
    expect(history).to_contain_text("Reviews and edits")
    expect(history).to_contain_text(f"edited by {tenant.user}")
    assert_accessible(page, "a memory's history")
    photograph(page, "my-memory-history-desktop")

    # restore version 1: If-Match of the version shown, through the console
    with page.expect_request(lambda r: r.url.endswith(f"{path}/restore")) as sent:
        history.get_by_role("button", name="Restore version 1").click()
    request = sent.value
    assert json.loads(request.post_data or "{}") == {"version": 1}
    assert request.headers["if-match"] == f'"{saved["version"] + 2}"'
    assert request.headers["x-engram-surface"] == "console"

    item = memories.get_by_role("listitem", name=f"Memory {FIRST[0]}")
    expect(item).to_contain_text(FIRST[1])
    history = item.get_by_role("region", name=f"History of {FIRST[0]}")
    expect(history.get_by_role("status")).to_contain_text("Restored version 1")
    fourth = version(history, FIRST[0], 4)
    expect(key_of(fourth)).to_have_text(f"[removed: {THIRD[0]}][added: {FIRST[0]}]")
    expect(value_of(fourth)).to_have_text(
        "[removed: monthly sales][added: quarterly royalty] statement, PDF"
    )
    expect(fourth).to_contain_text("through the console")
    expect(fourth).to_contain_text(f"By {tenant.user}, as the user")
    expect(fourth).to_contain_text("(still current)")
    expect(fourth.get_by_role("button", name=re.compile("^Restore"))).to_have_count(0)
    was_current = version(history, FIRST[0], 3)
    expect(was_current.get_by_role("button", name="Restore version 3")).to_be_visible()
    expect(was_current).to_contain_text(re.compile(r"until .+"))
    expect(history).to_contain_text(f"restored an earlier version by {tenant.user}")
    assert_accessible(page, "a memory's history after a restore")

    # the API says the same: version 1's key and value, a new version made through the console
    token = engram.token(tenant.user, tenant.team)
    with engram.http() as http:
        current = http.get(path, headers=engram.headers(token)).json()
    assert (current["key"], current["value"]) == FIRST
    latest = history_of(engram, tenant, memory_id)["versions"][-1]
    assert (latest["version"], latest["key"], latest["value"]) == (4, *FIRST)
    assert (latest["surface"], latest["actorKind"], latest["actorId"]) == (
        "console",
        "user",
        tenant.user,
    )

    # changed meanwhile elsewhere: restoring what the page shows is a conflict, then Reload
    write(engram, tenant, "PATCH", path, {"value": "annual statement"})
    history.get_by_role("button", name="Restore version 2").click()
    alert = history.get_by_role("alert")
    expect(alert).to_contain_text("Conflict: it changed since you opened it")
    expect(alert).to_contain_text("nothing was restored")
    assert_accessible(page, "a memory's history after a refused restore")
    alert.get_by_role("button", name="Reload").click()
    expect(alert).to_have_count(0)
    expect(item).to_contain_text("annual statement")
    expect(version(history, FIRST[0], 5)).to_contain_text("(still current)")
    with engram.http() as http:
        assert http.get(path, headers=engram.headers(token)).json()["value"] == "annual statement"
    context.close()


def test_history_recorded_from_a_later_version(browser: Browser, engram: LocalEngram):
    # a memory written before versions were kept: its history starts at a later version
    tenant = engram.tenant()
    saved = write(engram, tenant, "POST", "/v1/memories", {"key": "timezone", "value": "UTC"})
    write(engram, tenant, "PATCH", f"/v1/memories/{saved['id']}", {"value": "Europe/Paris"})

    def from_version_2(route: Route) -> None:
        answer = route.fetch()
        body = answer.json()
        body["versions"] = [v for v in body["versions"] if v["version"] >= 2]
        body["recordedFrom"] = 2
        route.fulfill(response=answer, body=json.dumps(body))

    context = open_context(browser)
    page = context.new_page()
    page.route(HISTORY, from_version_2)
    sign_in(page, engram, tenant.user, tenant.team)
    item = page.get_by_role("listitem", name="Memory timezone")
    item.get_by_role("button", name="History of timezone").click()
    history = item.get_by_role("region", name="History of timezone")
    expect(history).to_contain_text("History recorded from version 2")
    only = version(history, "timezone", 2)
    expect(only).to_contain_text("The first version recorded")
    expect(value_of(only)).to_have_text("Europe/Paris")
    expect(history.get_by_role("listitem", name="Version 1", exact=True)).to_have_count(0)
    assert_accessible(page, "a history recorded from version 2")
    context.close()
