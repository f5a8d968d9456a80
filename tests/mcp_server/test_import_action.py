"""execute(action="import"): an MCP server's tools/list published as mcp_tool rows through the
runner's own MCP pool, which then runs them. Real database, real server processes (the
`everything` test server); what is published here is deleted afterwards, dependents first.
"""

from __future__ import annotations

import sys
from collections.abc import AsyncIterator, Iterator
from pathlib import Path

import psycopg
import pytest
from mcp import Client
from psycopg.types.json import Jsonb

from runner import Plan, Runner, build_server
from runner.handlers.mcp_tool import McpToolHandler

from ..mcp import EVERYTHING, mcp_runner, stdio_server, unique
from ..mcp.test_importer import LONG_SERVER
from .test_server import failed, ok, text


@pytest.fixture
async def mcp(database_url: str, tmp_path: Path) -> AsyncIterator[tuple[Runner, McpToolHandler]]:
    runner, handler = mcp_runner(database_url, tmp_path / "cache")
    yield runner, handler
    await runner.aclose()


@pytest.fixture
def servers(conn: psycopg.Connection) -> Iterator[list[str]]:
    """mcp_server rows a test publishes; deleted afterwards with every tool they execute."""
    made: list[str] = []
    yield made
    for ref in reversed(made):
        conn.execute("delete from tools where executor_id = %s", (ref,))
        conn.execute("delete from tools where ref = %s", (ref,))


def publish_server(conn: psycopg.Connection, servers: list[str], args: list[str], **config: object) -> str:
    ref = unique("imported")
    servers.append(ref)
    conn.execute("select publish_tool_version(%s, '[]')", (Jsonb(stdio_server(ref, args, **config)),))
    return ref


async def test_import_publishes_the_tools_and_the_same_pool_runs_them(
    mcp: tuple[Runner, McpToolHandler], servers: list[str], conn: psycopg.Connection
) -> None:
    runner, handler = mcp
    ref = publish_server(conn, servers, [str(EVERYTHING), "stdio"])
    async with Client(build_server(runner, mcp_pool=handler.pool)) as client:
        result = await client.call_tool("execute", {"action": "import", "item_id": ref})
        report = ok(result)
        assert report["action"] == "import" and report["server"] == ref and report["ok"] is True
        tools = {t["tool_id"]: t for t in report["tools"]}
        assert len(tools) >= 10 and report["counts"] == {"created": len(tools)}
        assert tools[f"{ref}.echo"]["status"] == "created" and tools[f"{ref}.echo"]["version"] == "1.0.0"
        assert f"created   {ref}.echo@1.0.0" in text(result) and f"imported {ref}:" in text(result)

        # the import's session is in the runner's pool (the server in its sandbox, as a run
        # starts it), and the run uses it
        key = handler.spec_of(runner, Plan.from_json(await runner.registry.execution_plan(ref))).key
        session = handler.pool.session_for(key)
        assert session is not None
        loaded = ok(await client.call_tool("load", {"item_id": f"{ref}.echo"}))
        assert loaded["tool_type"] == "mcp_tool" and [c["tool_id"] for c in loaded["executor_chain"]][:2] == [
            f"{ref}.echo",
            ref,
        ]
        run = ok(
            await client.call_tool(
                "execute", {"action": "run", "item_id": f"{ref}.echo", "parameters": {"message": "hi"}}
            )
        )
        assert run["status"] == "success" and run["output"] == "Echo: hi"
        assert handler.pool.session_for(key) is session

        again = await client.call_tool("execute", {"action": "import", "item_id": ref})
        assert ok(again)["counts"] == {"unchanged": len(tools)}
        assert f"unchanged {ref}.echo@1.0.0" in text(again)
        found = ok(await client.call_tool("search", {"query": f"mcp:{ref} echo", "limit": 50}))
        assert f"{ref}.echo" in {i["item_id"] for i in found["items"]}


async def test_a_description_cut_to_the_registry_limit_is_said_in_the_answer(
    mcp: tuple[Runner, McpToolHandler], servers: list[str], conn: psycopg.Connection
) -> None:
    runner, handler = mcp
    ref = publish_server(conn, servers, [str(LONG_SERVER), "5000"], command=sys.executable)
    async with Client(build_server(runner, mcp_pool=handler.pool)) as client:
        result = await client.call_tool("execute", {"action": "import", "item_id": ref})
        (tool,) = ok(result)["tools"]
        assert (tool["tool_id"], tool["status"]) == (f"{ref}.lookup", "created")
        assert [n.split(" characters")[0] for n in tool["notes"]] == ["description cut from 5000 to 3999"]
        assert f"created   {ref}.lookup@1.0.0 (description cut from 5000 to 3999 characters" in text(result)


async def test_import_failures_are_tool_errors_with_hints(
    mcp: tuple[Runner, McpToolHandler], servers: list[str], conn: psycopg.Connection, tmp_path: Path
) -> None:
    runner, handler = mcp
    broken = publish_server(conn, servers, [str(tmp_path / "no_such_server.js")], startup_timeout_s=15)
    async with Client(build_server(runner, mcp_pool=handler.pool)) as client:
        body = failed(
            await client.call_tool("execute", {"action": "import", "item_id": "hello_world"}),
            "not an mcp_server",
            "type:mcp_server",
        )
        assert "script" in body
        failed(
            await client.call_tool("execute", {"action": "import", "item_id": "no_such_server_zz"}),
            "not found",
            "type:mcp_server",
        )
        failed(await client.call_tool("execute", {"action": "import"}), "no item_id")
        failed(
            await client.call_tool("execute", {"action": "import", "item_id": broken, "parameters": {"x": 1}}),
            "only item_id",
        )
        failed(await client.call_tool("execute", {"action": "import", "item_id": f"{broken}@1.0.0"}), "latest")
        start = await client.call_tool("execute", {"action": "import", "item_id": broken})
        failed(start, broken, f"load(item_id='{broken}')")
        assert start.structured_content and start.structured_content["error"]["kind"] == "mcp_connection"
        n = conn.execute("select count(*) from tools where executor_id = %s", (broken,)).fetchone()
        assert n is not None and n[0] == 0  # nothing published
        assert ok(await client.call_tool("search", {"query": "hello"}))["count"] >= 1  # still answering


async def test_a_server_built_without_an_mcp_pool_refuses_to_import(
    mcp: tuple[Runner, McpToolHandler], servers: list[str], conn: psycopg.Connection
) -> None:
    runner, handler = mcp
    ref = publish_server(conn, servers, [str(EVERYTHING), "stdio"])
    async with Client(build_server(runner)) as client:
        failed(
            await client.call_tool("execute", {"action": "import", "item_id": ref}),
            "no MCP client pool",
            "mcp_pool",
        )
    key = handler.spec_of(runner, Plan.from_json(await runner.registry.execution_plan(ref))).key
    assert handler.pool.session_for(key) is None, "nothing was started"


async def test_help_and_the_schema_describe_import(mcp: tuple[Runner, McpToolHandler]) -> None:
    runner, _ = mcp
    async with Client(build_server(runner)) as client:
        guide = ok(await client.call_tool("help", {"topic": "execute"}))["text"]
        assert "action=import" in guide and "mcp_server" in guide
        (execute,) = [t for t in (await client.list_tools()).tools if t.name == "execute"]
        action = execute.input_schema["properties"]["action"]
        assert "import" in action["enum"] and "import" in action["description"]
