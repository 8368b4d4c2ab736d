"""What Engram's MCP server offers."""

from __future__ import annotations

#: The tools Engram's MCP server lists.
MCP_TOOLS = {
    "memory_save",
    "memory_recall",
    "memory_forget",
    "session_context",
    "record_tool_outcome",
    "rank_tools",
}
