"""Kiwi's MCP server: what agents call (started by runner/cli/serve.py, `kiwi serve`).

    server.py      build_server: the four meta-tools (meta/) and the catalog (catalog/) on an MCPServer
    direct*.py     direct mode: the registry's tools themselves instead of the meta-tools
    stdio.py       the stdio wire, read and written by the event loop
    auth.py        incoming bearer tokens: whom an HTTP request acts as (never the tokens Kiwi sends)
    http_protocol.py, http_sessions.py  the streamable HTTP transport's checks and session limits
    approvals.py, log_level.py, notify_run.py, registry_events.py, agent_notifications.py
                   approvals, logging, a run's progress, and the registry's changes as notifications

It may use the client side (runner/mcp_client/: the pool that runs imported MCP servers'
tools); the client never imports it (tests/test_layers.py).
"""
