"""One chat turn with OpenAI's Responses API and Engram (see ``common`` for the steps).

Run it against ``engram serve`` with the scripted model (no API key needed)::

    uv run python -m examples.agent_loop.openai_responses_loop [--url URL --token TOKEN]

With a real model, pass ``openai.OpenAI()`` as ``model`` to ``run_turn``.
"""

from __future__ import annotations

import json
from typing import Any

import openai

from engram.client import EngramClient
from examples.agent_loop import common
from examples.agent_loop.common import ENGRAM_TOOLS, AppTool, Turn
from examples.agent_loop.openai_chat_loop import scripted_model  # the same SDK client

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
    turn, tools = common.start_turn(engram, message, FORMAT, definition)
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
            if call.name in ENGRAM_TOOLS:  # the function_call item as it came, the output as is
                result = turn.engram_tool(engram, call.name, call.to_dict(), FORMAT)
            else:
                _, text = turn.app_tool(engram, call.name, json.loads(call.arguments))
                result = {"type": "function_call_output", "call_id": call.call_id, "output": text}
            items.append(result)


def main(argv: list[str] | None = None) -> int:
    return common.main(FORMAT, run_turn, scripted_model, argv)


if __name__ == "__main__":
    raise SystemExit(main())
