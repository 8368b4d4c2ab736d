"""The tools a model calls, ``memory_save`` and ``memory_recall``: their arguments as a model
sends them (``MemorySaveArgs`` / ``MemoryRecallArgs``, validated once, then mapped to the same
commands an HTTP body gives), their JSON Schemas and each provider's format of the list.

Each format is the shape that provider's API takes in its list of tools, so a caller passes
the list on unchanged: ``json_schema`` (``{name, description, parameters}``, the schemas
themselves), ``openai_chat`` (Chat Completions: the definition nested under ``function``),
``openai_responses`` (the Responses API: flat, with ``strict``), ``anthropic``
(``input_schema``), ``bedrock`` (Converse's ``toolSpec`` with ``inputSchema.json``) and ``mcp``
(an MCP ``Tool``: ``inputSchema`` and behaviour ``annotations``).
"""

from __future__ import annotations

import copy
from collections.abc import Mapping
from typing import Any, Literal, TypeVar, get_args

from pydantic import BaseModel, ValidationError

from engram.api.memory_inputs import MemoryRecallArgs, MemorySaveArgs
from engram.errors import InvalidInput
from engram.memories.commands import Recall, SaveMemory
from engram.memories.tools import RECALL, SAVE, invalid_from, unknown_tool

M = TypeVar("M", bound=BaseModel)
ToolFormat = Literal[
    "json_schema", "openai_chat", "openai_responses", "anthropic", "bedrock", "mcp"
]
#: every format, in the order the docs list them
TOOL_FORMATS: tuple[ToolFormat, ...] = get_args(ToolFormat)
#: each tool's arguments model: what it validates is what its JSON Schema says
TOOL_ARGUMENTS: dict[str, type[BaseModel]] = {SAVE: MemorySaveArgs, RECALL: MemoryRecallArgs}
_DESCRIPTIONS = {
    SAVE: (
        "Save a short fact about the user (or about this assistant's work with the user) "
        "so it can be recalled in later conversations. Saving the same key again "
        "replaces its value."
    ),
    RECALL: (
        "Search the memories saved about the user. Any of the query's words may match; "
        "an empty query returns the most confident, most recent memories."
    ),
}
#: MCP tool annotations: recall only reads, saving a key again replaces its value, and both
#: touch nothing but Engram's memories
_MCP_ANNOTATIONS: dict[str, dict[str, bool]] = {
    name: {
        "readOnlyHint": name == RECALL,
        "destructiveHint": False,
        "idempotentHint": True,
        "openWorldHint": False,
    }
    for name in (SAVE, RECALL)
}


def _parameters(model: type[BaseModel]) -> dict[str, Any]:
    """The model's JSON Schema as a tool's parameters (no titles, no model description)."""
    schema = model.model_json_schema()
    for key in ("title", "description"):
        schema.pop(key, None)
    for prop in schema.get("properties", {}).values():
        prop.pop("title", None)
    schema.setdefault("required", [])
    return schema


TOOL_SCHEMAS: tuple[dict[str, Any], ...] = tuple(
    {"name": name, "description": _DESCRIPTIONS[name], "parameters": _parameters(model)}
    for name, model in TOOL_ARGUMENTS.items()
)


def _render(fmt: ToolFormat, schema: dict[str, Any]) -> dict[str, Any]:
    name, description, parameters = schema["name"], schema["description"], schema["parameters"]
    if fmt == "json_schema":
        return schema
    if fmt == "openai_chat":
        return {
            "type": "function",
            "function": {"name": name, "description": description, "parameters": parameters},
        }
    if fmt == "openai_responses":
        # ``strict`` is required here; strict mode would need every property required
        return {
            "type": "function",
            "name": name,
            "description": description,
            "parameters": parameters,
            "strict": False,
        }
    if fmt == "anthropic":
        return {"name": name, "description": description, "input_schema": parameters}
    if fmt == "bedrock":
        return {
            "toolSpec": {
                "name": name,
                "description": description,
                "inputSchema": {"json": parameters},
            }
        }
    if fmt == "mcp":
        return {
            "name": name,
            "description": description,
            "inputSchema": parameters,
            "annotations": dict(_MCP_ANNOTATIONS[name]),
        }
    raise InvalidInput("format", f"use one of {', '.join(TOOL_FORMATS)}")


def tool_definitions(fmt: ToolFormat = "json_schema") -> list[dict[str, Any]]:
    """The two tools in a provider's format (fresh copies; callers may mutate them)."""
    return [_render(fmt, s) for s in copy.deepcopy(list(TOOL_SCHEMAS))]


def _parse(model: type[M], arguments: object) -> M:
    if not isinstance(arguments, dict):
        raise InvalidInput("arguments", "must be a JSON object")
    try:
        return model.model_validate(arguments)
    except ValidationError as exc:
        raise invalid_from(exc) from None


def parse_save_args(arguments: object) -> MemorySaveArgs:
    return _parse(MemorySaveArgs, arguments)


def parse_recall_args(arguments: object) -> MemoryRecallArgs:
    return _parse(MemoryRecallArgs, arguments)


def tool_command(
    name: str,
    arguments: Mapping[str, Any],
    *,
    persona_id: str | None = None,
    source_channel_id: str | None = None,
) -> SaveMemory | Recall:
    """A model's call of tool ``name`` as the command it asks for: its arguments validated
    once, by the tool's arguments model (``InvalidInput`` naming the argument), and mapped to
    the command the HTTP route of the same action makes. ``persona_id`` and
    ``source_channel_id`` are validated ids (the provenance of a save; recall ignores the
    channel). An unknown tool raises ``NotFound``."""
    if name == SAVE:
        return parse_save_args(arguments).command(persona_id, source_channel_id)
    if name == RECALL:
        return parse_recall_args(arguments).command(persona_id)
    raise unknown_tool(name)
