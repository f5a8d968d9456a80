"""MCP: Kiwi as an MCP server (server.py, serve_cli.py) and as a client of MCP servers."""
