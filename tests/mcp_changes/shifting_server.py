"""A stdio MCP server whose tool list is a JSON file, read again at every tools/list: a test
peer for rug-pull protection, whose tools change between two reads when a test rewrites
the file. Its tools echo their `message` argument back, prefixed by the tool's name.

    python tests/mcp_changes/shifting_server.py TOOLS.json

TOOLS.json: [{"name", "description", "inputSchema", "annotations"?}, ...]
"""

from __future__ import annotations

import json
import sys
from pathlib import Path
from typing import Any


def main() -> None:
    import anyio
    import mcp_types as types
    from mcp.server.lowlevel import Server
    from mcp.server.stdio import stdio_server

    listing = Path(sys.argv[1])

    def tools() -> list[types.Tool]:
        return [types.Tool.model_validate(t) for t in json.loads(listing.read_text())]

    async def list_tools(ctx: Any, params: Any) -> types.ListToolsResult:
        return types.ListToolsResult(tools=tools())

    async def call_tool(ctx: Any, params: types.CallToolRequestParams) -> types.CallToolResult:
        said = (params.arguments or {}).get("message", "")
        return types.CallToolResult(content=[types.TextContent(type="text", text=f"{params.name}: {said}")])

    server: Server[Any] = Server("shifting", on_list_tools=list_tools, on_call_tool=call_tool)

    async def serve() -> None:
        async with stdio_server() as (read, write):
            await server.run(read, write, server.create_initialization_options())

    anyio.run(serve)


if __name__ == "__main__":
    main()
