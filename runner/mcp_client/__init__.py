"""Kiwi as a client of other MCP servers: their tools run as Kiwi tools (mcp_tool).

    pool.py      McpPool: sessions to MCP servers (stdio, sandboxed, or remote), kept, shared, retried
    servers.py   an mcp_server row's config as the pool's ServerSpec (command, sandbox, URL)
    importer.py  `kiwi mcp import` and `execute import`: a server's tools published as mcp_tool rows
    oauth/       outgoing OAuth 2.1: Kiwi signing in to remote servers, tokens encrypted per user

Used by runner/handlers/mcp_tool.py, the CLI and Kiwi's own MCP server (runner/mcp_server/);
it imports none of them (tests/test_layers.py).
"""
