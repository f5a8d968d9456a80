"""A tool's declared outputs over Kiwi's MCP server: `load` shows them as the tool's
outputSchema; `execute run` returns the checked output as structured content beside that
schema, and a mismatch is a tool error that keeps the output and names the place."""

from __future__ import annotations

import json
from collections.abc import Callable
from typing import Any

import pytest
from mcp import Client
from mcp.server.mcpserver import MCPServer
from mcp_types import CallToolResult

from runner import Runner, build_server

# the list form, as parameters may be written; its JSON Schema form is what MCP clients see
LISTED = [{"name": "count", "type": "integer", "required": True}, {"name": "label", "type": "string"}]
SCHEMA = {
    "type": "object",
    "properties": {"count": {"type": "integer"}, "label": {"type": "string"}},
    "required": ["count"],
}


@pytest.fixture
async def server(make_runner: Callable[..., Runner]) -> MCPServer:
    return build_server(make_runner())


def text(result: CallToolResult) -> str:
    return "\n".join(getattr(block, "text", "") for block in result.content)


def script(publish_tool: Callable[..., str], body: str, outputs: Any = None) -> str:
    manifest: dict[str, Any] = {"tool_type": "script", "executor": "bash_runtime"}
    if outputs is not None:
        manifest["outputs"] = outputs
    return publish_tool("mcp_outputs", manifest, {"run.sh": body}, entrypoint="run.sh")


async def test_load_shows_the_declared_outputs_as_the_tools_output_schema(
    server: MCPServer, publish_tool: Callable[..., str]
) -> None:
    declared, plain = script(publish_tool, "echo '{}'\n", LISTED), script(publish_tool, "echo hi\n")
    async with Client(server) as client:
        loaded = await client.call_tool("load", {"item_id": declared})
        bare = await client.call_tool("load", {"item_id": plain})
    assert not loaded.is_error, text(loaded)
    assert loaded.structured_content["outputs"] == LISTED and loaded.structured_content["outputSchema"] == SCHEMA
    assert "outputs (outputSchema): " + json.dumps(SCHEMA) in text(loaded)
    assert bare.structured_content["outputSchema"] is None and "outputSchema" not in text(bare)


async def test_execute_run_returns_the_checked_output_as_structured_content_with_its_schema(
    server: MCPServer, publish_tool: Callable[..., str]
) -> None:
    tool = script(publish_tool, """echo '{"count": 2, "label": "pair"}'\n""", LISTED)
    async with Client(server) as client:
        ran = await client.call_tool("execute", {"action": "run", "item_id": tool})
        plain = await client.call_tool("execute", {"action": "run", "item_id": script(publish_tool, "echo hi\n")})
    assert not ran.is_error, text(ran)
    assert ran.structured_content["status"] == "success"
    assert ran.structured_content["output"] == {"count": 2, "label": "pair"}
    assert ran.structured_content["outputSchema"] == SCHEMA
    assert json.dumps({"count": 2, "label": "pair"}, indent=2) in text(ran), "the same JSON as text"
    assert not plain.is_error and "outputSchema" not in plain.structured_content


async def test_a_mismatch_is_a_tool_error_that_keeps_the_output_and_names_the_place(
    server: MCPServer, publish_tool: Callable[..., str]
) -> None:
    tool = script(publish_tool, """echo '{"label": 7}'\n""", LISTED)
    async with Client(server) as client:
        ran = await client.call_tool("execute", {"action": "run", "item_id": tool})
    assert ran.is_error
    body, structured = text(ran), ran.structured_content
    assert "output.count: required" in body and "output.label: must be of type string, not integer" in body
    assert "hint: the tool returned what its `outputs` schema does not allow" in body
    assert structured["status"] == "error" and structured["failure"]["kind"] == "output_mismatch"
    assert structured["output"] == {"label": 7} and structured["outputSchema"] == SCHEMA
