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
from examples.agent_loop.common import (
    ENGRAM_TOOLS,
    AppTool,
    Script,
    Turn,
    engram_from_args,
    run_app_tool,
    scripted_http,
    show,
    start_turn,
)

FORMAT = "openai_chat"
MODEL = "gpt-4o-mini"


def definition(tool: AppTool) -> dict[str, Any]:
    function = {"name": tool.name, "description": tool.description, "parameters": tool.parameters}
    return {"type": "function", "function": function}


def run_turn(engram: EngramClient, model: openai.OpenAI, message: str) -> Turn:
    turn, exposed = start_turn(engram, message)
    tools = engram.provider_tools(FORMAT) + [definition(t) for t in exposed]
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
            turn.calls.append(call.function.name)
            if call.function.name in ENGRAM_TOOLS:  # the call as it came, the result as is
                result = engram.call_tool(call.function.name, call.to_dict(), format=FORMAT)
                turn.engram_results.append(result)
            else:
                _, text = run_app_tool(
                    engram, call.function.name, json.loads(call.function.arguments)
                )
                result = {"role": "tool", "tool_call_id": call.id, "content": text}
            messages.append(result)


def scripted_model(script: Script) -> openai.OpenAI:
    return openai.OpenAI(
        api_key="scripted",
        base_url="http://scripted.invalid/v1",
        http_client=scripted_http(script, httpx),
    )


def main(argv: list[str] | None = None) -> int:
    engram, message = engram_from_args(argv)
    with engram:
        show(run_turn(engram, scripted_model(Script(FORMAT)), message))
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
