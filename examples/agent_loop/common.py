"""What every provider's agent loop shares: the app's own tool catalogue, the session start,
catalogue ranking, running the app's tools and recording their outcomes, and the scripted
model each loop talks to when no provider is at hand.

One chat turn, whatever the provider:

1. ``POST /v1/sessions`` with the user's message: Engram's prompt section goes after the
   app's system prompt.
2. The app scores its catalogue against the message (its own relevance scale) and
   ``POST /v1/tools/rank`` orders it with the user's tool affinities; the best ``TOP_K`` are
   exposed, with Engram's ``memory_save`` and ``memory_recall`` in the provider's format
   (``GET /v1/tools?format=``, the client's ``provider_tools``).
3. The model is called; each of its tool calls runs: Engram's through
   ``POST /v1/tools/{name}?format=`` as the provider sent it (the answer is the tool result to
   append as it is), the app's here, its outcome recorded with ``POST /v1/events`` (the
   client's fire-and-forget ``emit_tool``). Results go back to the model until it answers.
"""

from __future__ import annotations

import json
import re
import time
from collections.abc import Callable, Iterator
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from engram.client import EngramClient
from engram_client.models import ToolRanking

SYSTEM_PROMPT = "You are the royalties assistant of a music publisher."
ENGRAM_TOOLS = frozenset({"memory_save", "memory_recall"})
#: how many of the app's own tools the model sees in one turn
TOP_K = 3
SCRIPTS = Path(__file__).resolve().parent / "scripts"


# --- the app's own tools --------------------------------------------------------------------
@dataclass(frozen=True)
class AppTool:
    name: str
    description: str
    parameters: dict[str, Any]
    run: Callable[[dict[str, Any]], Any]


class ToolFailed(Exception):
    """An app tool that did not work (recorded as a failure)."""


def _get_account(args: dict[str, Any]) -> Any:
    return {"accountId": args.get("accountId"), "name": "ACME Music", "territory": "EU"}


def _run_sql(args: dict[str, Any]) -> Any:
    raise ToolFailed("statement timeout after 30 s")


def _search_docs(args: dict[str, Any]) -> Any:
    return {"hits": [{"title": "Royalty statements", "url": "https://docs.invalid/royalty"}]}


def _send_email(args: dict[str, Any]) -> Any:
    return {"queued": True}


def _object(**properties: str) -> dict[str, Any]:
    return {
        "type": "object",
        "properties": {
            name: {"type": "string", "description": d} for name, d in properties.items()
        },
        "required": list(properties),
        "additionalProperties": False,
    }


CATALOGUE: dict[str, AppTool] = {
    tool.name: tool
    for tool in (
        AppTool(
            "get_account",
            "Look up an account by id: name, territory, royalty contract.",
            _object(accountId="The account id, e.g. A-17."),
            _get_account,
        ),
        AppTool(
            "run_sql",
            "Run a read-only SQL query over royalty statements of an account.",
            _object(query="One SELECT statement."),
            _run_sql,
        ),
        AppTool(
            "search_docs",
            "Search the publisher's documentation and help pages.",
            _object(query="Words to search for."),
            _search_docs,
        ),
        AppTool(
            "send_email",
            "Send an email to the user.",
            _object(subject="The subject line.", body="The text."),
            _send_email,
        ),
    )
}


def relevance(message: str, tool: AppTool) -> float:
    """The app's own relevance score of a tool for a message: the words they share (a stand-in
    for its real catalogue search; any scale will do, Engram adds ``2 × affinity`` to it)."""
    words = set(re.findall(r"[a-z0-9]+", message.lower()))
    described = set(re.findall(r"[a-z0-9]+", f"{tool.name} {tool.description}".lower()))
    return float(len(words & described))


def run_app_tool(engram: EngramClient, name: str, args: dict[str, Any]) -> tuple[bool, str]:
    """Run one of the app's tools and record its outcome; ``(ok, text for the model)``."""
    started = time.perf_counter()
    try:
        result = CATALOGUE[name].run(args)
    except (ToolFailed, KeyError) as exc:
        error = str(exc) if isinstance(exc, ToolFailed) else f"no tool named {name}"
        engram.emit_tool(name, ok=False, duration_ms=_ms(started), error=error)
        return False, f"Error: {error}"
    engram.emit_tool(name, ok=True, duration_ms=_ms(started), result=result)
    return True, json.dumps(result)


def _ms(started: float) -> int:
    return int((time.perf_counter() - started) * 1000)


# --- one turn -------------------------------------------------------------------------------
@dataclass
class Turn:
    """What a turn did: the model's final text, the app tools exposed (ranked), the calls
    made, and the results Engram's tools answered (as the provider's shapes)."""

    system: str = ""
    exposed: list[str] = field(default_factory=list)
    ranking: ToolRanking | None = None
    calls: list[str] = field(default_factory=list)
    engram_results: list[dict[str, Any]] = field(default_factory=list)
    text: str = ""

    def engram_tool(
        self, engram: EngramClient, name: str, call: dict[str, Any], fmt: str
    ) -> dict[str, Any]:
        """Run one of Engram's tools with the call as the provider sent it; the answer is the
        tool result to append as it is."""
        self.calls.append(name)
        result = engram.call_tool(name, call, format=fmt)
        self.engram_results.append(result)
        return result

    def app_tool(self, engram: EngramClient, name: str, args: dict[str, Any]) -> tuple[bool, str]:
        """Run one of the app's tools and record its outcome (``run_app_tool``)."""
        self.calls.append(name)
        return run_app_tool(engram, name, args)


def start_turn(
    engram: EngramClient,
    message: str,
    fmt: str,
    definition: Callable[[AppTool], dict[str, Any]],
) -> tuple[Turn, list[dict[str, Any]]]:
    """Session start and catalogue ranking: the system prompt, and the tools the model sees
    (Engram's in the provider's format ``fmt``, then the best ``TOP_K`` of the app's as
    ``definition`` writes them)."""
    session = engram.start_session(query=message)
    system = session.system_prompt(SYSTEM_PROMPT)
    scores = {name: relevance(message, tool) for name, tool in CATALOGUE.items()}
    ranking = engram.rank_tools(scores)
    exposed = [CATALOGUE[name] for name in ranking.names()[:TOP_K]]
    tools = engram.provider_tools(fmt) + [definition(t) for t in exposed]
    return Turn(system=system, exposed=[t.name for t in exposed], ranking=ranking), tools


# --- the scripted model ---------------------------------------------------------------------
class Script:
    """A provider's responses, in its exact wire format, handed out in order; the requests
    the loop sent are kept (as the SDK serialised them) for anyone to check."""

    def __init__(self, provider: str, *, path: Path | None = None) -> None:
        self.responses: list[dict[str, Any]] = json.loads(
            (path or SCRIPTS / f"{provider}.json").read_text(encoding="utf-8")
        )
        self.requests: list[dict[str, Any]] = []
        self._next: Iterator[dict[str, Any]] = iter(self.responses)

    def answer(self, request: dict[str, Any]) -> dict[str, Any]:
        self.requests.append(request)
        try:
            return next(self._next)
        except StopIteration:
            raise RuntimeError("the script has no more responses") from None


def scripted_http(script: Script, http: Any) -> Any:
    """An HTTP client whose transport is the script: what a provider's SDK sends goes to
    ``script.answer`` instead of the network. ``http`` is the module the SDK is built on
    (``httpx`` for OpenAI's, ``httpx2`` for Anthropic's), whose ``MockTransport`` it takes."""

    def handle(request: Any) -> Any:
        return http.Response(200, json=script.answer(json.loads(request.content)))

    return http.Client(transport=http.MockTransport(handle))


def engram_from_args(argv: list[str] | None = None) -> tuple[EngramClient, str]:
    """``--url`` (default http://127.0.0.1:8000), ``--token`` (default: a dev token from the
    local service's key, as ``engram token`` makes), ``--message``."""
    import argparse

    parser = argparse.ArgumentParser()
    parser.add_argument("--url", default="http://127.0.0.1:8000")
    parser.add_argument("--token")
    parser.add_argument(
        "--message",
        default="What royalties did account A-17 earn? I want reports as CSV, not PDF.",
    )
    args = parser.parse_args(argv)
    token = args.token
    if token is None:
        from engram.local.tokens import issue_token

        token = issue_token("alice", "acme")
    return EngramClient(args.url, token), args.message


def show(turn: Turn) -> None:
    print(f"exposed app tools (ranked): {', '.join(turn.exposed)}")
    print(f"calls: {', '.join(turn.calls)}")
    print(f"assistant: {turn.text}")


def main(
    fmt: str,
    run_turn: Callable[[EngramClient, Any, str], Turn],
    scripted_model: Callable[[Script], Any],
    argv: list[str] | None = None,
) -> int:
    """A loop's command line: one turn against the service with the scripted model."""
    engram, message = engram_from_args(argv)
    with engram:
        show(run_turn(engram, scripted_model(Script(fmt)), message))
    return 0
