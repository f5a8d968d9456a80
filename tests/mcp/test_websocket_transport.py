"""Remote MCP servers over a websocket (`transport: websocket`, a ws:// url), against a real
local MCP server on a websocket (tests/mcp/websocket_server.py): its tools are imported and
run through `kiwi run` and MCP `execute`, with the bearer token of `auth: {type: bearer}` on
the handshake; a wrong token is a clear connection error.
"""

from __future__ import annotations

from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest
from mcp import Client

from runner import build_server, import_server
from tests.kiwi_cli import kiwi_env, run_kiwi
from tests.mcp import mcp_runner, unique
from tests.mcp.test_handler import Publish, mcp_tool, publish  # noqa: F401  (publish: a fixture)
from tests.mcp.websocket_server import WebsocketServer, websocket_mcp_server
from tests.mcp_server.test_server import ok

pytestmark = pytest.mark.slow


@pytest.fixture
def ws_server() -> Iterator[WebsocketServer]:
    with websocket_mcp_server() as server:
        yield server


def ws_manifest(url: str, token: str) -> dict[str, Any]:
    return {
        "tool_id": unique("ws_remote"),
        "tool_type": "mcp_server",
        "executor": "http_client",
        "version": "1.0.0",
        "description": "a remote MCP server over a websocket",
        "config": {"transport": "websocket", "url": url, "auth": {"type": "bearer", "token": token}},
    }


async def test_mcp_execute_runs_a_tool_of_a_websocket_server(
    publish: Publish,  # noqa: F811
    ws_server: WebsocketServer,
    database_url: str,
    tmp_path: Path,
) -> None:
    server = publish(ws_manifest(ws_server.url, ws_server.token))
    runner, handler = mcp_runner(database_url, tmp_path / "cache")
    try:
        report = await import_server(runner.registry, handler.pool, server, runner.environ)
        assert report.ok and report.counts()["created"] == 1, report
        async with Client(build_server(runner, mcp_pool=handler.pool), mode="legacy") as c:
            args = {"action": "run", "item_id": f"{server}.shout", "parameters": {"text": "over a websocket"}}
            result = ok(await c.call_tool("execute", args))
    finally:
        await runner.aclose()
    assert result["output"] == {"result": "OVER A WEBSOCKET"}
    assert ws_server.handshakes and set(ws_server.handshakes) == {f"Bearer {ws_server.token}"}


def test_kiwi_run_calls_a_websocket_server(
    publish: Publish,  # noqa: F811
    ws_server: WebsocketServer,
    database_url: str,
    tmp_path: Path,
) -> None:
    server = publish(ws_manifest(ws_server.url, ws_server.token))
    tool = publish(mcp_tool(server, "shout", config={"tool": "shout"}))
    done = run_kiwi(
        ["run", tool, "-p", "text=hey", "--json"], cwd=tmp_path, env=kiwi_env(database_url, tmp_path / "cache")
    )
    assert done.code == 0, done.err
    assert done.json()["output"] == {"result": "HEY"}


def test_a_wrong_token_is_refused_at_the_handshake(
    publish: Publish,  # noqa: F811
    ws_server: WebsocketServer,
    database_url: str,
    tmp_path: Path,
) -> None:
    server = publish(ws_manifest(ws_server.url, "not-the-token"))
    tool = publish(mcp_tool(server, "shout", config={"tool": "shout"}))
    done = run_kiwi(
        ["run", tool, "-p", "text=hey", "--json"], cwd=tmp_path, env=kiwi_env(database_url, tmp_path / "cache")
    )
    assert done.code != 0
    assert "rejected WebSocket connection: HTTP 401" in done.out, (done.out, done.err)
    assert set(ws_server.handshakes) == {"Bearer not-the-token"}  # tried again, never with another token
