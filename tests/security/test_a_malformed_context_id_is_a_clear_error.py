"""Finding: a non-uuid MCP `context` reached the database as it was, and `execute open_context`
answered with its raw error (`invalid input syntax for type uuid`), naming no field. The MCP
layer now checks it (runner/mcp_server/meta/args.py check_context_id) and names `context`; a run
with one is refused by the gate, naming the field, and audited as before.
"""

from __future__ import annotations

import pytest
from mcp import Client
from mcp.server.mcpserver import MCPServer

from runner import Runner, build_server

BAD = ["nope", "1234", "' or 1=1 --", "x" * 300]


@pytest.fixture
async def server(runner: Runner) -> MCPServer:
    return build_server(runner)


def said(result: object) -> str:
    return "\n".join(getattr(b, "text", "") for b in getattr(result, "content", []))


@pytest.mark.parametrize("context", BAD)
async def test_open_context_under_a_malformed_parent_names_the_field(server: MCPServer, context: str) -> None:
    async with Client(server) as client:
        result = await client.call_tool("execute", {"action": "open_context", "context": context})
    assert result.is_error and "context: must be an execution context's id (a UUID)" in said(result), said(result)
    assert "invalid input syntax" not in said(result) and "hint:" in said(result)


@pytest.mark.parametrize("action", ["run", "dry_run"])
async def test_a_run_in_a_malformed_context_names_the_field(server: MCPServer, action: str) -> None:
    async with Client(server) as client:
        result = await client.call_tool("execute", {"action": action, "item_id": "hello_world", "context": "nope"})
    assert result.is_error and "context" in said(result) and "must be a uuid" in said(result), said(result)
    assert "invalid input syntax" not in said(result)
