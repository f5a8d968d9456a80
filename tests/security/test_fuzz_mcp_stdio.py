"""Through stdio too, the meta tools answer any arguments with a result or an error that says
what was wrong, and the server neither dies nor logs a traceback.

The official MCP SDK's stdio client spawns `kiwi serve` (stdio) as a throwaway user
(KIWI_ACCESS_TOKEN) who owns a namespace, and Hypothesis sends the arguments of
tests/security/test_fuzz_mcp_endpoint.py (fewer of them: one process serves them all) to
`search`, `load`, `execute` and `help`. The SDK's session lives in one task of the module's
event loop (anyio's scopes must be left in the task that entered them); each example hands it
a call through a queue.
"""

from __future__ import annotations

import asyncio
import contextlib
import sys
from collections.abc import Awaitable, Callable, Iterator
from pathlib import Path
from typing import Any

import psycopg
import pytest
from hypothesis import event, given, settings
from hypothesis import strategies as st
from mcp.client.session import ClientSession
from mcp.client.stdio import StdioServerParameters, stdio_client
from mcp.shared.exceptions import MCPError

from runner.testing.http_serving import ROOT, serve_env, user_token
from tests.security.test_fuzz_mcp_endpoint import ARGUMENTS, EXAMPLES, NS, TENANT, check_text, json_values

TIMEOUT_S = 60.0

Call = Callable[[ClientSession], Awaitable[Any]]


def without_surrogates(value: Any) -> Any:
    """`value` with lone surrogates replaced: the SDK client cannot encode them (the HTTP test
    sends them escaped in JSON)."""
    if isinstance(value, str):
        return value.encode("utf-8", "replace").decode()
    if isinstance(value, list):
        return [without_surrogates(v) for v in value]
    if isinstance(value, dict):
        return {without_surrogates(k): without_surrogates(v) for k, v in value.items()}
    return value


class StdioServer:
    """`kiwi serve` over stdio with one SDK session, driven from synchronous tests."""

    def __init__(self, loop: asyncio.AbstractEventLoop, params: StdioServerParameters, log: Path) -> None:
        self.loop, self.params, self.log = loop, params, log
        self.calls: asyncio.Queue[tuple[Call, asyncio.Future[Any]] | None] = asyncio.Queue()
        self.ready: asyncio.Future[None] = loop.create_future()
        self.task = loop.create_task(self._serve())
        loop.run_until_complete(asyncio.wait_for(asyncio.shield(self.ready), TIMEOUT_S))
        self.log_seen = 0

    async def _serve(self) -> None:
        with self.log.open("w") as errlog:
            try:
                async with stdio_client(self.params, errlog=errlog) as (read, write), ClientSession(read, write) as s:
                    await s.initialize()
                    self.ready.set_result(None)
                    while (item := await self.calls.get()) is not None:
                        call, answer = item
                        try:
                            answer.set_result(await call(s))
                        except Exception as e:  # handed to the example that asked
                            answer.set_exception(e)
            except Exception as e:
                if not self.ready.done():
                    self.ready.set_exception(e)
                raise

    def call(self, call: Call) -> Any:
        answer: asyncio.Future[Any] = self.loop.create_future()
        self.calls.put_nowait((call, answer))
        return self.loop.run_until_complete(asyncio.wait_for(answer, TIMEOUT_S))

    def new_stderr(self) -> str:
        text = self.log.read_text(errors="replace")
        new, self.log_seen = text[self.log_seen :], len(text)
        return new

    def close(self) -> None:
        self.calls.put_nowait(None)
        with contextlib.suppress(Exception):
            self.loop.run_until_complete(asyncio.wait_for(self.task, TIMEOUT_S))


@pytest.fixture(scope="module")
def server(
    database_url: str, loop: asyncio.AbstractEventLoop, tmp_path_factory: pytest.TempPathFactory
) -> Iterator[StdioServer]:
    workdir = tmp_path_factory.mktemp("fuzz-stdio")
    env = serve_env(database_url, workdir / "cache", KIWI_ACCESS_TOKEN=user_token(str(TENANT), expires_in_s=3600))
    params = StdioServerParameters(command=sys.executable, args=["-m", "runner.cli", "serve"], env=env, cwd=ROOT)
    with psycopg.connect(database_url, autocommit=True) as conn:
        conn.execute(
            "insert into namespaces (namespace, owner_id) values (%s, %s) on conflict do nothing", (NS, TENANT)
        )
        s = StdioServer(loop, params, workdir / "serve.log")
        try:
            yield s
        finally:
            s.close()
            conn.execute("delete from approvals where namespace = %s", (NS,))
            conn.execute("delete from tools where namespace = %s or owner_id = %s", (NS, TENANT))
            conn.execute("delete from namespaces where owner_id = %s", (TENANT,))


def call_tool(server: StdioServer, name: str, arguments: Any) -> None:
    """A result (a tool error with a message) or a JSON-RPC error with one; no traceback."""
    try:
        result = server.call(lambda s: s.call_tool(name, without_surrogates(arguments)))
    except MCPError as e:
        event(f"JSON-RPC {e.error.code}")
        check_text(e.error.message)
    else:
        if result.is_error:
            event("tool error")
            check_text(" ".join(getattr(part, "text", "") for part in result.content))
        else:
            event("result")
    stderr = server.new_stderr()
    assert "Traceback" not in stderr, stderr[-3000:]


@settings(EXAMPLES, max_examples=25)
@given(name=st.sampled_from(["search", "load", "help"]), data=st.data())
def test_search_load_and_help_take_any_arguments_over_stdio(
    name: str, data: st.DataObject, server: StdioServer
) -> None:
    junk = st.dictionaries(st.text(max_size=8), json_values, max_size=3)  # the SDK client sends only objects
    call_tool(server, name, data.draw(ARGUMENTS[name] | junk, label="arguments"))


@settings(EXAMPLES, max_examples=30)
@given(arguments=ARGUMENTS["execute"])
def test_execute_takes_any_arguments_over_stdio(arguments: dict[str, Any], server: StdioServer) -> None:
    call_tool(server, "execute", arguments)


def test_the_stdio_server_still_searches_after_all_that(server: StdioServer) -> None:
    result = server.call(lambda s: s.call_tool("search", {"query": "hello"}))
    assert not result.is_error, result.content
    assert "Traceback" not in server.new_stderr()
