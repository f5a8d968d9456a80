"""A stdio MCP server with one tool, `traceparent`, that answers the W3C traceparent its caller
sent in the request's `_meta` (empty when none came).

    python tests/telemetry/meta_echo_server.py
"""

from typing import Any

from mcp.server import MCPServer
from mcp.server.mcpserver import Context


def main() -> None:
    server = MCPServer("meta-echo")

    @server.tool(name="traceparent", description="The traceparent of the request's _meta.")
    def traceparent(ctx: Context) -> str:
        meta: Any = ctx.request_context.meta or {}
        found = meta.get("traceparent") if isinstance(meta, dict) else getattr(meta, "traceparent", None)
        if found is None and hasattr(meta, "model_extra"):
            found = (meta.model_extra or {}).get("traceparent")
        return str(found or "")

    server.run("stdio")


if __name__ == "__main__":
    main()
