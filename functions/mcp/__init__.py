"""The MCP Lambda function (handler: ``functions.mcp.handler.handler``)."""
