"""Kiwi's four MCP meta-tools as plain module-level functions, each taking the server's state
first, so that each can be imported and called alone (a test needs no MCP client):

    search.search(state, query, item_type, limit)
    load.load(state, item_id, item_type, version, include_content)
    execute.execute(state, action, item_id, ...)
    help.help(state, topic)

`state` is a `state.ServerState`; runner/mcp_server/server.py binds it and registers the four on an
MCPServer. The functions are not re-exported here: a function named like its module would
hide the module (`runner.mcp_server.meta.search` must stay the module).
"""
