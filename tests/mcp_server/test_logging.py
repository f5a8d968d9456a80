"""The MCP `logging` capability of Kiwi's server (issue 17, item 3): `logging/setLevel` works and
holds per connection, and a tool's stderr lines reach the client that ran it as log
notifications for its call, while the tool runs, at the connection's level.

Through the SDK's own client, in memory: "legacy" is the 2025 handshake (JSON-RPC framing,
setLevel), the default is 2026-07-28 (each request opts in with its own `_meta` level).
No mocks: the real database, real runs, real processes.
"""

from __future__ import annotations

import asyncio
import time
from typing import Any

import psycopg
import pytest
from mcp import Client
from mcp.server.mcpserver import MCPServer
from mcp_types import LoggingMessageNotificationParams

from runner.mcp_server.notify_run import line_level
from tests.mcp_server.test_server import bash_tool, mine, ok

# Three lines, 0.4 s apart, then an answer on stdout.
TALKER = """\
echo "starting $KIWI_PARAM_WHO" >&2
sleep 0.4
echo "WARNING: halfway" >&2
sleep 0.4
echo "debug: the details" >&2
echo '{"done": true}'
"""
PARAMETERS = [{"name": "who", "type": "string", "required": False}]

# the SDK marks MCP logging deprecated from 2026-07-28 on; the 2025 versions have it
pytestmark = pytest.mark.filterwarnings("ignore::mcp.shared.exceptions.MCPDeprecationWarning")


@pytest.fixture
def talker(conn: psycopg.Connection, server: MCPServer) -> Any:
    """The id of a tool that writes three stderr lines over 0.8 s (published by the test)."""
    made: list[str] = []

    async def publish(script: str = TALKER) -> str:
        tool_id = mine("mcp_talker")
        made.append(tool_id)
        async with Client(server) as c:
            ok(await c.call_tool("execute", {"action": "create", **bash_tool(tool_id, script, parameters=PARAMETERS)}))
        return tool_id

    yield publish
    for tool_id in made:
        conn.execute("delete from tools where ref = %s", (tool_id,))


class Heard:
    """The log notifications a client received, each with when it arrived."""

    def __init__(self) -> None:
        self.logs: list[tuple[float, LoggingMessageNotificationParams]] = []

    async def __call__(self, params: LoggingMessageNotificationParams) -> None:
        self.logs.append((time.monotonic(), params))

    def lines(self) -> list[str]:
        return [str(p.data) for _, p in self.logs]


def run_args(tool_id: str, **params: Any) -> dict[str, Any]:
    return {"action": "run", "item_id": tool_id, "parameters": params}


async def test_the_server_advertises_logging_and_accepts_set_level(server: MCPServer) -> None:
    async with Client(server, mode="legacy") as c:
        assert c.server_capabilities.logging is not None
        answer = await c.set_logging_level("warning")
        assert answer.model_dump(exclude_none=True) == {}


async def test_stderr_lines_arrive_as_log_notifications_while_the_tool_runs(server: MCPServer, talker: Any) -> None:
    tool_id = await talker()
    heard = Heard()
    async with Client(server, mode="legacy", logging_callback=heard) as c:
        await c.set_logging_level("debug")
        result = ok(await c.call_tool("execute", run_args(tool_id, who="Ada")))
        answered = time.monotonic()
    assert result["output"] == {"done": True}
    assert heard.lines() == ["starting Ada", "WARNING: halfway", "debug: the details"]
    levels = [p.level for _, p in heard.logs]
    assert levels == ["info", "warning", "debug"]
    assert {p.logger for _, p in heard.logs} == {tool_id}
    first_at = heard.logs[0][0]
    assert answered - first_at > 0.6, "the first line came only with the answer, not while the tool ran"


async def test_the_level_holds_for_the_connection_that_set_it_only(server: MCPServer, talker: Any) -> None:
    tool_id = await talker()
    strict, default = Heard(), Heard()
    async with (
        Client(server, mode="legacy", logging_callback=strict) as a,
        Client(server, mode="legacy", logging_callback=default) as b,
    ):
        await a.set_logging_level("warning")
        ok(await a.call_tool("execute", run_args(tool_id)))
        ok(await b.call_tool("execute", run_args(tool_id)))
        await a.set_logging_level("error")
        ok(await a.call_tool("execute", run_args(tool_id)))
    assert strict.lines() == ["WARNING: halfway"]  # the second run, at error, sent nothing
    assert default.lines() == ["starting ", "WARNING: halfway"]  # info by default: not debug


async def test_a_2026_client_gets_lines_only_when_its_request_opts_in(server: MCPServer, talker: Any) -> None:
    tool_id = await talker()
    silent, opted = Heard(), Heard()
    async with Client(server, logging_callback=silent) as c:
        ok(await c.call_tool("execute", run_args(tool_id)))
    async with Client(server, logging_callback=opted, log_level="warning") as c:
        ok(await c.call_tool("execute", run_args(tool_id)))
    assert silent.lines() == []
    assert opted.lines() == ["WARNING: halfway"]


async def test_other_actions_and_meta_tools_send_no_log_notifications(server: MCPServer, talker: Any) -> None:
    tool_id = await talker()
    heard = Heard()
    async with Client(server, mode="legacy", logging_callback=heard) as c:
        await c.set_logging_level("debug")
        ok(await c.call_tool("execute", {"action": "dry_run", "item_id": tool_id}))
        ok(await c.call_tool("load", {"item_id": tool_id}))
    assert heard.lines() == []


async def test_a_flood_of_stderr_neither_blocks_the_run_nor_the_server(server: MCPServer, talker: Any) -> None:
    tool_id = await talker("seq 1 20000 >&2\necho '{\"n\": 20000}'\n")
    heard = Heard()
    async with Client(server, mode="legacy", logging_callback=heard) as c:
        started = time.monotonic()
        result = ok(await asyncio.wait_for(c.call_tool("execute", run_args(tool_id)), 60))
        assert time.monotonic() - started < 30
    assert result["output"] == {"n": 20000}
    lines = heard.lines()
    assert lines[:3] == ["1", "2", "3"]
    if len(lines) < 20000:  # what could not be sent is said, never silently lost
        assert "were not sent" in lines[-1]


def test_a_line_s_level_comes_from_its_first_word() -> None:
    assert line_level("WARNING: disk almost full") == "warning"
    assert line_level("[error] boom") == "error"
    assert line_level("Traceback (most recent call last):") == "error"
    assert line_level("debug: x=1") == "debug"
    assert line_level("fatal: not a git repository") == "critical"
    assert line_level("compiling 3 files") == "info"
    assert line_level("") == "info"
