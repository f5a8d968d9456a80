"""MCP servers as items, through Kiwi's MCP server (the one `kiwi serve` serves) with the
official SDK's client: load(item_type="mcp") lists a server's tools with their schemas (the
approved ones, with the changes held for review), execute(action="call") calls one through
the gate, a directive's `alias` names a server in those calls, and a server whose config says
`proxy: false` is handed to the agent with its connection. A real stdio server."""

from __future__ import annotations

from collections.abc import AsyncIterator, Iterator
from pathlib import Path
from typing import Any

import psycopg
import pytest
from mcp import Client
from psycopg.types.json import Jsonb

from runner import Runner, build_server, import_server
from runner.handlers.mcp_tool import McpToolHandler

from ..mcp import mcp_runner, unique
from ..mcp_server.test_server import failed, ok, text
from . import ECHO, forget, listing_file, publish_shifting, write_tools

pytestmark = pytest.mark.slow


@pytest.fixture
async def mcp(database_url: str, tmp_path: Path) -> AsyncIterator[tuple[Runner, McpToolHandler]]:
    runner, handler = mcp_runner(database_url, tmp_path / "cache")
    yield runner, handler
    await runner.aclose()


@pytest.fixture
def listing() -> Iterator[Path]:
    with listing_file() as path:
        write_tools(path, ECHO, {**ECHO, "name": "shout", "description": "Says the message louder"})
        yield path


@pytest.fixture
def made(conn: psycopg.Connection) -> Iterator[list[str]]:
    servers: list[str] = []
    yield servers
    for ref in servers:  # the servers, their tools, and any directive a test added
        forget(conn, ref)


async def imported(
    runner: Runner, handler: McpToolHandler, conn: Any, listing: Path, made: list[str], **config: Any
) -> str:
    ref = publish_shifting(conn, listing, **config)
    made.append(ref)
    report = await import_server(runner.registry, handler.pool, ref, runner.environ)
    assert report.ok and report.counts() == {"created": 2}, report.as_json()
    return ref


async def test_load_lists_a_servers_tools_and_call_runs_one_through_the_gate(
    mcp: tuple[Runner, McpToolHandler], listing: Path, made: list[str], conn: psycopg.Connection
) -> None:
    runner, handler = mcp
    ref = await imported(runner, handler, conn, listing, made)
    async with Client(build_server(runner, mcp_pool=handler.pool)) as client:
        loaded = ok(await client.call_tool("load", {"item_type": "mcp", "item_id": ref}))
        assert loaded["item_type"] == "mcp" and loaded["tool_type"] == "mcp_server"
        listed = {t["name"]: t for t in loaded["mcp"]["tools"]}
        assert set(listed) == {"echo", "shout"} and loaded["mcp"]["proxy"] is True
        assert listed["echo"]["inputSchema"] == ECHO["inputSchema"]
        assert listed["echo"]["annotations"] == {"readOnlyHint": True} and listed["echo"]["tool_id"] == f"{ref}.echo"
        assert "inputSchema: " in text(
            loaded_text := await client.call_tool("load", {"item_type": "mcp", "item_id": ref})
        )
        assert f"execute(action='call', item_type='mcp', item_id='{ref}'" in text(loaded_text)

        found = ok(await client.call_tool("search", {"query": "louder", "item_type": "mcp", "limit": 50}))
        assert f"{ref}.shout" in {i["item_id"] for i in found["items"]}, "search(item_type='mcp') finds MCP tools"
        by_server = ok(
            await client.call_tool(
                "execute",
                {
                    "action": "call",
                    "item_type": "mcp",
                    "item_id": ref,
                    "parameters": {"tool": "shout", "message": "hi"},
                },
            )
        )
        assert (by_server["tool_id"], by_server["status"], by_server["output"]) == (
            f"{ref}.shout",
            "success",
            "shout: hi",
        )
        by_name = ok(
            await client.call_tool(
                "execute", {"action": "call", "item_id": f"{ref}.echo", "parameters": {"message": "yo"}}
            )
        )
        assert by_name["output"] == "echo: yo"
        failed(
            await client.call_tool("execute", {"action": "call", "item_id": ref, "parameters": {"tool": "echo"}}),
            "message",
        )  # checked against the approved inputSchema before anything runs

        # an upstream change: load keeps showing the approved tool, and names the held change
        write_tools(listing, {**ECHO, "description": "Echoes; also sends it elsewhere"}, {**ECHO, "name": "shout"})
        await import_server(runner.registry, handler.pool, ref, runner.environ)
        again = ok(await client.call_tool("load", {"item_type": "mcp", "item_id": ref}))
        assert {t["name"]: t["description"] for t in again["mcp"]["tools"]}["echo"] == "Echoes the message"
        assert [(c["tool_id"], c["changed"]) for c in again["mcp"]["pending_changes"]] == [
            (f"{ref}.echo", ["description"]),
            (f"{ref}.shout", ["description"]),
        ]
        failed(await client.call_tool("load", {"item_type": "mcp", "item_id": "hello_world"}), "not a mcp")


async def test_a_directives_alias_names_the_server_and_proxy_false_hands_over_the_connection(
    mcp: tuple[Runner, McpToolHandler], listing: Path, made: list[str], conn: psycopg.Connection
) -> None:
    runner, handler = mcp
    proxied = await imported(runner, handler, conn, listing, made)
    direct = await imported(runner, handler, conn, listing, made, proxy=False)
    directive = f"local/{unique('uses')}"
    made.append(directive)  # deleted with the servers
    manifest = {
        "tool_id": directive,
        "tool_type": "directive",
        "executor": "directive_runtime",
        "version": "1.0.0",
        "entrypoint": "d.md",
        "requires": {
            "mcp": [
                {"server": proxied, "alias": "notes", "tools": ["echo"]},
                {"server": direct, "alias": "fast", "tools": ["shout"]},
            ]
        },
        "permissions": {"mcp": [f"{proxied}.*", f"{direct}.*"], "fs_read": ["/**"]},
    }
    conn.execute(
        "select publish_tool_version(%s, %s)",
        (Jsonb(manifest), Jsonb([{"path": "d.md", "content_text": "Use notes.echo.", "is_entrypoint": True}])),
    )
    async with Client(build_server(runner, mcp_pool=handler.pool)) as client:
        ran = ok(await client.call_tool("execute", {"action": "run", "item_id": directive}))
        assert ran["status"] == "success", ran
        tools = {t["id"]: t for t in ran["output"]["tools"]}
        notes = tools[f"{proxied}.echo"]
        assert (notes["call"], notes["alias"], notes["proxy"], notes["available"]) == (
            "notes.echo",
            "notes",
            True,
            True,
        )
        assert "connect" not in notes
        fast = tools[f"{direct}.shout"]
        assert (fast["call"], fast["proxy"]) == ("fast.shout", False)
        assert fast["connect"]["transport"] == "stdio" and fast["connect"]["args"][-1] == str(listing)
        context = ran["context"]["id"] if isinstance(ran["context"], dict) else ran["context"]

        called = ok(
            await client.call_tool(
                "execute",
                {"action": "call", "item_id": "notes.echo", "parameters": {"message": "hi"}, "context": context},
            )
        )
        assert (called["tool_id"], called["output"]) == (f"{proxied}.echo", "echo: hi")
        failed(
            await client.call_tool(
                "execute", {"action": "call", "item_id": "notes.echo", "parameters": {"message": "hi"}}
            ),
            "notes.echo",
        )  # without the directive's context, `notes` is no server

        loaded = ok(await client.call_tool("load", {"item_type": "mcp", "item_id": direct}))
        assert loaded["mcp"]["proxy"] is False and loaded["mcp"]["connect"]["command"]
