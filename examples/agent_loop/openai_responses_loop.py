"""One chat turn with OpenAI's Responses API and Engram (see ``common`` for the steps).

Run it against ``engram serve`` with the scripted model (no API key needed)::

    uv run python -m examples.agent_loop.openai_responses_loop [--url URL --token TOKEN]

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

FORMAT = "openai_responses"
MODEL = "gpt-4o-mini"


def definition(tool: AppTool) -> dict[str, Any]:
    return {
        "type": "function",
        "name": tool.name,
        "description": tool.description,
        "parameters": tool.parameters,
        "strict": True,
    }


def run_turn(engram: EngramClient, model: openai.OpenAI, message: str) -> Turn:
    turn, exposed = start_turn(engram, message)
    tools = engram.provider_tools(FORMAT) + [definition(t) for t in exposed]
    items: list[dict[str, Any]] = [{"role": "user", "content": message}]
    while True:
        response = model.responses.create(
            model=MODEL,
            instructions=turn.system,
            input=items,  # type: ignore[arg-type]
            tools=tools,  # type: ignore[arg-type]
        )
        items += [item.to_dict() for item in response.output]
        calls = [item for item in response.output if item.type == "function_call"]
        if not calls:
            turn.text = response.output_text
            return turn
        for call in calls:
            turn.calls.append(call.name)
            if call.name in ENGRAM_TOOLS:  # the function_call item as it came, the output as is
                result = engram.call_tool(call.name, call.to_dict(), format=FORMAT)
                turn.engram_results.append(result)
            else:
                _, text = run_app_tool(engram, call.name, json.loads(call.arguments))
                result = {"type": "function_call_output", "call_id": call.call_id, "output": text}
            items.append(result)


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
