"""The example agent loops (``examples/agent_loop``), one per provider, against ``engram serve``
with a scripted model at the provider boundary: the provider's SDK (or botocore) serialises
every request and parses every scripted answer, Engram's tools and results go to the model as
Engram answered them, and each checked by that provider's own SDK types.

Two turns per provider, one user: the first exposes the ranked catalogue, recalls nothing,
gets an error result for a ``memory_save`` without a value and saves on the model's retry,
and records the app tools' outcomes (``get_account`` works, ``run_sql`` times out); the
second starts a session that has learnt from them: the prompt carries the memory and the
facts, and the ranking pushes the failing tool down.
"""

from __future__ import annotations

import importlib
import json
import subprocess
import sys
from typing import Any

import pytest
from examples.agent_loop.common import CATALOGUE, SYSTEM_PROMPT, Script, relevance
from tests.e2e.harness import REPO, LocalEngram, eventually
from tests.support import provider_sdks as sdk

pytestmark = pytest.mark.e2e

PROVIDERS = {
    "openai_chat": "examples.agent_loop.openai_chat_loop",
    "openai_responses": "examples.agent_loop.openai_responses_loop",
    "anthropic": "examples.agent_loop.anthropic_loop",
    "bedrock": "examples.agent_loop.bedrock_loop",
}
MESSAGE = "What royalties did account A-17 earn? I want reports as CSV, not PDF."
CALLS = ["memory_recall", "get_account", "run_sql", "memory_save", "memory_save"]


def sent_tools(fmt: str, request: dict[str, Any]) -> list[dict[str, Any]]:
    tools: list[dict[str, Any]] = (
        request["toolConfig"]["tools"] if fmt == "bedrock" else request["tools"]
    )
    return tools


def sent_system(fmt: str, request: dict[str, Any]) -> str:
    if fmt == "openai_chat":
        return str(request["messages"][0]["content"])
    if fmt == "openai_responses":
        return str(request["instructions"])
    if fmt == "bedrock":
        return str(request["system"][0]["text"])
    return str(request["system"])


def sent_history(fmt: str, request: dict[str, Any]) -> list[Any]:
    """Every message (or item, or content block) the request carries, flattened."""
    history = request["input"] if fmt == "openai_responses" else request["messages"]
    out: list[Any] = []
    for entry in history:
        content = entry.get("content") if isinstance(entry, dict) else None
        out.append(entry)
        if isinstance(content, list):
            out.extend(content)
    return out


def engram_calls(fmt: str, request: dict[str, Any]) -> list[dict[str, Any]]:
    """The model's calls of Engram's tools, as the loop sent them back to the model."""
    kind = {"openai_responses": "function_call", "anthropic": "tool_use"}.get(fmt)
    calls: list[dict[str, Any]] = []
    for entry in sent_history(fmt, request):
        if not isinstance(entry, dict):
            continue
        if fmt == "openai_chat":
            calls += entry.get("tool_calls") or []
        elif (fmt == "bedrock" and "toolUse" in entry) or (kind and entry.get("type") == kind):
            calls.append(entry)
    names = {
        "openai_chat": lambda c: c["function"]["name"],
        "bedrock": lambda c: c["toolUse"]["name"],
    }
    name_of = names.get(fmt, lambda c: c["name"])
    return [c for c in calls if name_of(c).startswith("memory_")]


def run(module: str, service: LocalEngram, engram: Any, fmt: str) -> tuple[Any, Script]:
    loop = importlib.import_module(module)
    script = Script(fmt)
    turn = loop.run_turn(engram, loop.scripted_model(script), MESSAGE)
    return turn, script


@pytest.mark.parametrize("fmt", list(PROVIDERS))
def test_agent_loop_two_turns(fmt: str, service: LocalEngram) -> None:
    tenant = service.tenant()
    engram = service.user_client(tenant.user, tenant.team)
    turn, script = run(PROVIDERS[fmt], service, engram, fmt)

    # the turn ran the script to its end, executing every call
    assert turn.calls == CALLS
    assert turn.text.startswith("Account A-17 is ACME Music")
    assert len(script.requests) == len(script.responses) == 4
    first = script.requests[0]
    assert sent_system(fmt, first) == SYSTEM_PROMPT  # a new user: Engram knows nothing yet

    # the tools the model saw: Engram's exactly as served, then the top of the ranked catalogue
    engram_tools = engram.provider_tools(fmt)
    tools = sent_tools(fmt, first)
    assert tools[:2] == engram_tools
    for definition in engram_tools:
        assert sdk.definition_problems(fmt, definition) == []
    scores = {name: relevance(MESSAGE, tool) for name, tool in CATALOGUE.items()}
    assert turn.exposed == sorted(scores, key=lambda n: -scores[n])[:3]
    assert turn.ranking.names()[:3] == turn.exposed
    assert all(t.affinity == 0.0 for t in turn.ranking.tools)

    # Engram's results: accepted by the SDK's types, each answering its call, in the next request
    recall, refused, saved = turn.engram_results
    calls = engram_calls(fmt, script.requests[-1])
    assert len(calls) == 3
    for call, result in zip(calls, turn.engram_results, strict=True):
        assert sdk.result_problems(fmt, result, call) == []
    text = json.dumps([recall, refused, saved])
    assert "No memories found." in json.dumps(recall)
    assert "Invalid arguments, nothing was done: value: Field required" in json.dumps(refused)
    assert 'Saved memory \\"preferred report format\\" (user).' in text
    if fmt == "anthropic":
        assert (recall["is_error"], refused["is_error"], saved["is_error"]) == (False, True, False)
    if fmt == "bedrock":
        statuses = [r["toolResult"]["status"] for r in (recall, refused, saved)]
        assert statuses == ["success", "error", "success"]
        for request in script.requests:  # botocore validated them; the enums too
            assert sdk.converse_problems(request) == []
    later = sent_history(fmt, script.requests[-1])
    assert recall in later
    assert refused in later
    assert saved in sent_history(fmt, script.requests[3])

    # the memory is saved once, the outcomes are recorded
    assert [m.value for m in engram.recall("report format")] == ["CSV, not PDF"]
    report = engram.drain()
    assert report.done
    assert report.sent == 2

    def learnt() -> dict[str, Any] | None:
        session = engram.start_session()
        subjects = {f.subject for f in session.facts}
        wanted = {"tool_affinity:get_account", "tool_avoidance:run_sql"}
        return session if wanted <= subjects else None

    eventually(learnt)

    # the next turn: the prompt carries what was learnt, and run_sql is pushed down
    second, script2 = run(PROVIDERS[fmt], service, engram, fmt)
    system = sent_system(fmt, script2.requests[0])
    assert system.startswith(SYSTEM_PROMPT + "\n\n")
    assert "CSV, not PDF" in system
    assert "get_account" in system
    ranked = {t.name: t for t in second.ranking.tools}
    assert ranked["get_account"].affinity > 0 > ranked["run_sql"].affinity
    assert ranked["run_sql"].boosted_score == pytest.approx(
        scores["run_sql"] + 2 * ranked["run_sql"].affinity
    )
    order = second.ranking.names()
    assert order.index("get_account") < order.index("run_sql")
    assert scores["run_sql"] > scores["get_account"]  # relevance alone put run_sql first


@pytest.mark.parametrize("fmt", list(PROVIDERS))
def test_each_example_runs_from_the_command_line(fmt: str, service: LocalEngram) -> None:
    tenant = service.tenant()
    token = service.token(tenant.user, tenant.team)
    done = subprocess.run(
        [sys.executable, "-m", PROVIDERS[fmt], "--url", service.url, "--token", token],
        cwd=REPO,
        capture_output=True,
        text=True,
        timeout=120,
        check=False,
    )
    assert done.returncode == 0, done.stderr
    assert "calls: " + ", ".join(CALLS) in done.stdout
    assert "assistant: Account A-17 is ACME Music" in done.stdout
