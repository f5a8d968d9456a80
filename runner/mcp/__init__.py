"""MCP: Kiwi as an MCP server (server.py, meta/, auth.py; started by runner/cli/serve.py) and as a client
of MCP servers (pool.py, servers.py, importer.py)."""
