"""Cancelling a run over MCP (issue 17, item 5): a `notifications/cancelled` for an `execute`
in flight ends the run and every process it started, the server sends no response for that
request, and the run's record says it was cancelled.

Found: the cancelled request's run went on. Measured here with a real tool that sleeps, its
processes found in /proc by a marker (as tests/security/test_no_orphans.py does), JSON-RPC
written by hand over the SDK's in-memory transport (so every message the server sends is
seen), and once over streamable HTTP against `kiwi serve`.
"""

from __future__ import annotations

import asyncio
import contextlib
import json
import time
from collections.abc import AsyncIterator, Callable, Iterator
from pathlib import Path
from typing import Any

import anyio
import httpx2
import psycopg
import pytest
from mcp import Client
from mcp.client._memory import InMemoryTransport
from mcp.server.mcpserver import MCPServer
from mcp.shared.message import SessionMessage
from mcp_types import JSONRPCError, JSONRPCResponse, jsonrpc_message_adapter

from runner import Runner
from runner.harness.run import CANCELLED
from runner.testing.http_serving import kiwi_http_server
from tests.mcp_server.test_server import ok
from tests.security.test_no_orphans import kill_tagged, none_left, tagged

# Says it started, then sleeps in a child of its own (a process tree: bash, and sleep).
SLEEPER = 'echo "started" >&2\nsleep 300 &\nwait\n'
STARTED_WITHIN_S = 20.0


@pytest.fixture
def marker() -> Iterator[str]:
    value = f"kiwi-cancel-{time.time_ns()}"
    try:
        yield value
    finally:
        kill_tagged(value)


@pytest.fixture
def sleeper(publish_tool: Callable[..., str]) -> str:
    manifest = {
        "tool_type": "script",
        "executor": "bash_runtime",
        "config": {"timeout_s": 600},
        "parameters": [{"name": "marker", "type": "string", "required": True}],
    }
    return publish_tool("mcp_sleeper", manifest, {"run.sh": SLEEPER}, entrypoint="run.sh")


async def started(marker: str, names: frozenset[str] = frozenset()) -> dict[int, str]:
    """The run's processes, once they run (and once `names` are among them: the sandbox's
    bwrap carries the marker before the tool's own processes have been exec'd)."""
    deadline = time.monotonic() + STARTED_WITHIN_S
    while not (found := tagged(marker)) or not names <= set(found.values()):
        assert time.monotonic() < deadline, f"the tool never started: {found}"
        await asyncio.sleep(0.05)
    return found


def last_record(conn: psycopg.Connection, tool_id: str) -> dict[str, Any]:
    cur = conn.execute(
        "select status, error_summary from tool_runs where tool_id like %s order by started_at desc limit 1",
        (f"%{tool_id}",),
    )
    row = cur.fetchone()
    assert row is not None, f"no run record of {tool_id}"
    return {"status": row[0], "error_summary": row[1]}


class Raw:
    """JSON-RPC written by hand over the SDK's in-memory transport: every message seen."""

    def __init__(self, read: Any, write: Any) -> None:
        self.read, self.write = read, write

    async def send(self, message: dict[str, Any]) -> None:
        await self.write.send(SessionMessage(jsonrpc_message_adapter.validate_python({"jsonrpc": "2.0", **message})))

    async def answer(self, request_id: int) -> Any:
        while True:
            item = await self.read.receive()
            message = item.message if isinstance(item, SessionMessage) else None
            if isinstance(message, JSONRPCResponse | JSONRPCError) and message.id == request_id:
                return message

    async def seen_within(self, seconds: float) -> list[Any]:
        messages: list[Any] = []
        with anyio.move_on_after(seconds):
            while True:
                item = await self.read.receive()
                messages.append(item.message if isinstance(item, SessionMessage) else item)
        return messages


@contextlib.asynccontextmanager
async def raw_client(server: MCPServer) -> AsyncIterator[Raw]:
    async with InMemoryTransport(server) as (read, write):
        raw = Raw(read, write)
        init = {"protocolVersion": "2025-06-18", "capabilities": {}, "clientInfo": {"name": "raw", "version": "0"}}
        await raw.send({"id": 1, "method": "initialize", "params": init})
        assert isinstance(await raw.answer(1), JSONRPCResponse)
        await raw.send({"method": "notifications/initialized"})
        yield raw


def run_request(request_id: int, tool_id: str, marker: str) -> dict[str, Any]:
    arguments = {"action": "run", "item_id": tool_id, "parameters": {"marker": marker}}
    return {"id": request_id, "method": "tools/call", "params": {"name": "execute", "arguments": arguments}}


def cancel(request_id: int) -> dict[str, Any]:
    return {"method": "notifications/cancelled", "params": {"requestId": request_id, "reason": "the user stopped it"}}


async def test_a_cancelled_run_is_killed_with_its_tree_and_never_answered(
    server: MCPServer, runner: Runner, conn: psycopg.Connection, sleeper: str, marker: str
) -> None:
    async with raw_client(server) as raw:
        await raw.send(run_request(7, sleeper, marker))
        await started(marker, frozenset({"bash", "sleep"}))  # the tool's tree, not only its sandbox
        await raw.send(cancel(7))
        assert await none_left(marker) == {}, "the run went on after it was cancelled"
        seen = await raw.seen_within(1.5)
        assert not [m for m in seen if getattr(m, "id", None) == 7], f"the cancelled request was answered: {seen}"
        await raw.send({"id": 8, "method": "ping"})  # the connection still serves
        assert isinstance(await raw.answer(8), JSONRPCResponse)
    await runner.flush_records()
    record = last_record(conn, sleeper)
    assert record["status"] == "error"
    assert record["error_summary"] == CANCELLED


async def test_the_sdk_client_cancelling_its_call_stops_the_run(server: MCPServer, sleeper: str, marker: str) -> None:
    async with Client(server, mode="legacy") as c:
        arguments = {"action": "run", "item_id": sleeper, "parameters": {"marker": marker}}
        call = asyncio.ensure_future(c.call_tool("execute", arguments))
        await started(marker)
        call.cancel()  # the SDK sends notifications/cancelled for it
        with pytest.raises(asyncio.CancelledError):
            await call
        assert await none_left(marker) == {}
        assert ok(await c.call_tool("help", {"topic": "overview"}))


async def test_cancelling_another_request_or_a_finished_one_changes_nothing(
    server: MCPServer, sleeper: str, marker: str
) -> None:
    async with raw_client(server) as raw:
        await raw.send({"id": 3, "method": "ping"})
        assert isinstance(await raw.answer(3), JSONRPCResponse)
        await raw.send(cancel(3))  # long answered
        await raw.send(run_request(4, sleeper, marker))
        await started(marker)
        await raw.send(cancel(99))  # no such request
        await asyncio.sleep(0.5)
        assert tagged(marker), "a cancellation for another request stopped this run"
        await raw.send(cancel(4))
        assert await none_left(marker) == {}


async def test_over_streamable_http_a_cancelled_run_is_killed_and_gets_no_result(
    database_url: str, tmp_path: Path, conn: psycopg.Connection, sleeper: str, marker: str
) -> None:
    with kiwi_http_server(database_url, tmp_path, "--insecure-no-auth") as served:
        accept = {"Accept": "application/json, text/event-stream", "Content-Type": "application/json"}
        async with httpx2.AsyncClient(timeout=httpx2.Timeout(30, read=60)) as http:
            init = {"protocolVersion": "2025-06-18", "capabilities": {}, "clientInfo": {"name": "raw", "version": "0"}}
            opened = await http.post(
                served.url, headers=accept, json={"jsonrpc": "2.0", "id": 1, "method": "initialize", "params": init}
            )
            assert opened.status_code == 200, opened.text
            headers = {
                **accept,
                "mcp-session-id": opened.headers["mcp-session-id"],
                "mcp-protocol-version": "2025-06-18",
            }
            initialized = {"jsonrpc": "2.0", "method": "notifications/initialized"}
            assert (await http.post(served.url, headers=headers, json=initialized)).status_code == 202

            async def run_stream() -> list[dict[str, Any]]:
                got: list[dict[str, Any]] = []
                body = {"jsonrpc": "2.0", **run_request(5, sleeper, marker)}
                async with http.stream("POST", served.url, headers=headers, json=body) as answer:
                    async for line in answer.aiter_lines():
                        if line.startswith("data:") and line[5:].strip():
                            got.append(json.loads(line[5:]))
                return got

            stream = asyncio.ensure_future(run_stream())
            await started(marker)
            sent = await http.post(served.url, headers=headers, json={"jsonrpc": "2.0", **cancel(5)})
            assert sent.status_code == 202
            assert await none_left(marker) == {}, "the run went on after it was cancelled"
            messages = await asyncio.wait_for(stream, 20)
    results = [m for m in messages if m.get("id") == 5 and "result" in m]
    assert results == [], f"the cancelled request got a result: {results}"
    # The SDK's 2025 streamable HTTP transport ends a request's stream only with a message for
    # its id, so it ends a cancelled one with error -32800 ("Request cancelled"), never a result.
    assert all(m.get("error", {}).get("code") == -32800 for m in messages if m.get("id") == 5), messages
    deadline = time.monotonic() + 15
    while True:  # the server's recorder writes behind the run
        with contextlib.suppress(AssertionError):
            record = last_record(conn, sleeper)
            if record["error_summary"] == CANCELLED:
                break
        assert time.monotonic() < deadline, "the cancelled run left no record saying so"
        await asyncio.sleep(0.2)
    assert record["status"] == "error"
