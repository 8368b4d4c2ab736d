"""One chat turn with Amazon Bedrock's Converse API and Engram (see ``common`` for the steps).

Run it against ``engram serve`` with the scripted model (no AWS account needed: botocore's
``Stubber`` answers ``converse`` from the script, after botocore has validated the request
against the Converse shapes as it does before any real call)::

    uv run python -m examples.agent_loop.bedrock_loop [--url URL --token TOKEN]

With a real model, pass ``boto3.client("bedrock-runtime")`` as ``model`` to ``run_turn``.
"""

from __future__ import annotations

import copy
from typing import Any

import boto3
from botocore.stub import Stubber

from engram.client import EngramClient
from examples.agent_loop import common
from examples.agent_loop.common import ENGRAM_TOOLS, AppTool, Script, Turn

FORMAT = "bedrock"
MODEL = "anthropic.claude-3-5-haiku-20241022-v1:0"


def definition(tool: AppTool) -> dict[str, Any]:
    spec = {"name": tool.name, "description": tool.description}
    return {"toolSpec": {**spec, "inputSchema": {"json": tool.parameters}}}


def run_turn(engram: EngramClient, model: Any, message: str) -> Turn:
    turn, tools = common.start_turn(engram, message, FORMAT, definition)
    messages: list[dict[str, Any]] = [{"role": "user", "content": [{"text": message}]}]
    while True:
        reply = model.converse(
            modelId=MODEL,
            system=[{"text": turn.system}],
            messages=messages,
            toolConfig={"tools": tools},
        )
        said = reply["output"]["message"]
        messages.append(said)
        if reply["stopReason"] != "tool_use":
            turn.text = "".join(block.get("text", "") for block in said["content"])
            return turn
        results: list[dict[str, Any]] = []
        for block in said["content"]:
            if "toolUse" not in block:
                continue
            use = block["toolUse"]
            if use["name"] in ENGRAM_TOOLS:  # the toolUse block as it came, the result as is
                result = turn.engram_tool(engram, use["name"], block, FORMAT)
            else:
                ok, text = turn.app_tool(engram, use["name"], dict(use["input"]))
                result = {
                    "toolResult": {
                        "toolUseId": use["toolUseId"],
                        "content": [{"text": text}],
                        "status": "success" if ok else "error",
                    }
                }
            results.append(result)
        messages.append({"role": "user", "content": results})


class ScriptedConverse:
    """A real bedrock-runtime client whose ``converse`` answers come from the script: each
    request is validated by botocore against the Converse input shape, each scripted answer
    against its output shape (``Stubber``), and the requests are kept in ``script.requests``."""

    def __init__(self, script: Script) -> None:
        self.script = script
        self.client = boto3.client(
            "bedrock-runtime",
            region_name="us-east-1",
            aws_access_key_id="scripted",
            aws_secret_access_key="scripted",  # noqa: S106 - no AWS call is made
        )
        self.stubber = Stubber(self.client)
        for response in script.responses:
            self.stubber.add_response("converse", response)
        self.stubber.activate()

    def converse(self, **params: Any) -> Any:
        self.script.requests.append(copy.deepcopy(params))
        return self.client.converse(**params)


def scripted_model(script: Script) -> ScriptedConverse:
    return ScriptedConverse(script)


def main(argv: list[str] | None = None) -> int:
    return common.main(FORMAT, run_turn, scripted_model, argv)


if __name__ == "__main__":
    raise SystemExit(main())
