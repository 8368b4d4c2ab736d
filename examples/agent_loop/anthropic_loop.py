"""One chat turn with Anthropic's Messages API and Engram (see ``common`` for the steps).

Run it against ``engram serve`` with the scripted model (no API key needed)::

    uv run python -m examples.agent_loop.anthropic_loop [--url URL --token TOKEN]

With a real model, pass ``anthropic.Anthropic()`` as ``model`` to ``run_turn``.
"""

from __future__ import annotations

from typing import Any

import anthropic
import httpx2

from engram.client import EngramClient
from examples.agent_loop import common
from examples.agent_loop.common import ENGRAM_TOOLS, AppTool, Script, Turn, scripted_http

FORMAT = "anthropic"
MODEL = "claude-3-5-haiku-20241022"


def definition(tool: AppTool) -> dict[str, Any]:
    return {"name": tool.name, "description": tool.description, "input_schema": tool.parameters}


def run_turn(engram: EngramClient, model: anthropic.Anthropic, message: str) -> Turn:
    turn, tools = common.start_turn(engram, message, FORMAT, definition)
    messages: list[dict[str, Any]] = [{"role": "user", "content": message}]
    while True:
        reply = model.messages.create(
            model=MODEL, max_tokens=1024, system=turn.system, tools=tools, messages=messages
        )
        messages.append({"role": "assistant", "content": [b.to_dict() for b in reply.content]})
        if reply.stop_reason != "tool_use":
            turn.text = "".join(b.text for b in reply.content if b.type == "text")
            return turn
        results: list[dict[str, Any]] = []
        for block in reply.content:
            if block.type != "tool_use":
                continue
            if block.name in ENGRAM_TOOLS:  # the tool_use block as it came, the result as is
                result = turn.engram_tool(engram, block.name, block.to_dict(), FORMAT)
            else:
                ok, text = turn.app_tool(engram, block.name, dict(block.input))
                result = {
                    "type": "tool_result",
                    "tool_use_id": block.id,
                    "content": text,
                    "is_error": not ok,
                }
            results.append(result)
        messages.append({"role": "user", "content": results})


def scripted_model(script: Script) -> anthropic.Anthropic:
    return anthropic.Anthropic(
        api_key="scripted",
        base_url="http://scripted.invalid",
        http_client=scripted_http(script, httpx2),
    )


def main(argv: list[str] | None = None) -> int:
    return common.main(FORMAT, run_turn, scripted_model, argv)


if __name__ == "__main__":
    raise SystemExit(main())
