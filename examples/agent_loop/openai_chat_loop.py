"""One chat turn with OpenAI's Chat Completions API and Engram (see ``common`` for the steps).

Run it against ``engram serve`` with the scripted model (no API key needed)::

    uv run python -m examples.agent_loop.openai_chat_loop [--url URL --token TOKEN]

With a real model, pass ``openai.OpenAI()`` as ``model`` to ``run_turn``.
"""

from __future__ import annotations

import json
from typing import Any

import httpx
import openai

from engram.client import EngramClient
from examples.agent_loop import common
from examples.agent_loop.common import ENGRAM_TOOLS, AppTool, Script, Turn, scripted_http

FORMAT = "openai_chat"
MODEL = "gpt-4o-mini"


def definition(tool: AppTool) -> dict[str, Any]:
    function = {"name": tool.name, "description": tool.description, "parameters": tool.parameters}
    return {"type": "function", "function": function}


def run_turn(engram: EngramClient, model: openai.OpenAI, message: str) -> Turn:
    turn, tools = common.start_turn(engram, message, FORMAT, definition)
    messages: list[dict[str, Any]] = [
        {"role": "system", "content": turn.system},
        {"role": "user", "content": message},
    ]
    while True:
        completion = model.chat.completions.create(
            model=MODEL,
            messages=messages,  # type: ignore[arg-type]
            tools=tools,  # type: ignore[arg-type]
        )
        reply = completion.choices[0].message
        messages.append(reply.to_dict())
        if not reply.tool_calls:
            turn.text = reply.content or ""
            return turn
        for call in reply.tool_calls:
            if call.type != "function":
                continue
            name = call.function.name
            if name in ENGRAM_TOOLS:  # the call as it came, the result as is
                result = turn.engram_tool(engram, name, call.to_dict(), FORMAT)
            else:
                _, text = turn.app_tool(engram, name, json.loads(call.function.arguments))
                result = {"role": "tool", "tool_call_id": call.id, "content": text}
            messages.append(result)


def scripted_model(script: Script) -> openai.OpenAI:
    return openai.OpenAI(
        api_key="scripted",
        base_url="http://scripted.invalid/v1",
        http_client=scripted_http(script, httpx),
    )


def main(argv: list[str] | None = None) -> int:
    return common.main(FORMAT, run_turn, scripted_model, argv)


if __name__ == "__main__":
    raise SystemExit(main())
