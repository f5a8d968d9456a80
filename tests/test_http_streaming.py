"""The http_client primitive's streamed responses, through `kiwi run` and MCP `execute`: server-sent
events, newline-delimited JSON and plain chunks from a real local HTTP server are passed on as
progress while they arrive (`… ` lines on the CLI's stderr, progress notifications over MCP)
and collected into the run's output.
"""

from __future__ import annotations

import time
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import Any

import pytest
from mcp import Client

from runner import Runner, build_server
from tests.http_feeds import feeds
from tests.kiwi_cli import kiwi_env, run_kiwi
from tests.mcp_server.test_progress import Progress, counting_up
from tests.mcp_server.test_server import ok

pytestmark = pytest.mark.slow


@pytest.fixture(scope="module")
def base() -> Iterator[str]:
    with feeds() as (url, _):
        yield url


def api_tool(publish_tool: Callable[..., str], config: dict[str, Any]) -> str:
    return publish_tool("streamed", {"tool_type": "api", "executor": "http_client", "config": config})


def test_kiwi_run_prints_each_event_as_progress_and_outputs_them_all(
    publish_tool: Callable[..., str], base: str, database_url: str, tmp_path: Path
) -> None:
    tool = api_tool(publish_tool, {"url": f"{base}/sse?n=3"})
    done = run_kiwi(["run", tool, "--json"], cwd=tmp_path, env=kiwi_env(database_url, tmp_path / "cache"))
    assert done.code == 0, done.err
    result = done.json()
    assert result["output"] == [
        {"event": "message", "data": {"n": 1}},
        {"event": "message", "data": {"n": 2}},
        {"event": "last", "data": {"n": 3}, "id": "3"},
    ]
    told = [line for line in done.err.splitlines() if line.startswith("… ")]
    assert told == ['… {"n": 1}', '… {"n": 2}', '… last: {"n": 3}'], done.err


def test_stream_until_ends_the_stream_and_a_transform_picks_from_the_events(
    publish_tool: Callable[..., str], base: str, database_url: str, tmp_path: Path
) -> None:
    config = {"url": f"{base}/sse?n=2&done=1", "stream_until": "[DONE]", "response_transform": "$[*].data.n"}
    tool = api_tool(publish_tool, config)
    done = run_kiwi(["run", tool, "--json"], cwd=tmp_path, env=kiwi_env(database_url, tmp_path / "cache"))
    assert done.code == 0, done.err
    assert done.json()["output"] == [1, 2]
    assert "[DONE]" not in done.err


async def test_mcp_execute_sends_each_event_as_progress_before_the_answer(
    runner: Runner, publish_tool: Callable[..., str], base: str
) -> None:
    tool = api_tool(publish_tool, {"url": f"{base}/sse?n=3&gap=0.3"})
    heard = Progress()
    async with Client(build_server(runner), mode="legacy") as c:
        result = ok(await c.call_tool("execute", {"action": "run", "item_id": tool}, progress_callback=heard))
        answered = time.monotonic()
    assert [item["data"] for item in result["output"]] == [{"n": 1}, {"n": 2}, {"n": 3}]
    assert heard.messages() == ['{"n": 1}', '{"n": 2}', 'last: {"n": 3}']
    assert counting_up(heard.values())
    assert answered - heard.seen[0][3] > 0.5, "the events came only with the answer"


async def test_newline_delimited_json_is_one_item_per_line(
    runner: Runner, publish_tool: Callable[..., str], base: str
) -> None:
    tool = api_tool(publish_tool, {"url": f"{base}/ndjson?n=3"})
    heard = Progress()
    async with Client(build_server(runner), mode="legacy") as c:
        result = ok(await c.call_tool("execute", {"action": "run", "item_id": tool}, progress_callback=heard))
    assert result["output"] == [{"line": 1}, {"line": 2}, {"line": 3}]
    assert heard.messages() == ['{"line": 1}', '{"line": 2}', '{"line": 3}']


async def test_chunks_are_progress_and_the_body_is_the_output(
    runner: Runner, publish_tool: Callable[..., str], base: str
) -> None:
    tool = api_tool(publish_tool, {"url": f"{base}/chunks?n=3&gap=0.2", "stream": "chunks"})
    heard = Progress()
    async with Client(build_server(runner), mode="legacy") as c:
        result = ok(await c.call_tool("execute", {"action": "run", "item_id": tool}, progress_callback=heard))
    assert result["output"] == "part 1;part 2;part 3;"
    assert heard.messages() == ["part 1;", "part 2;", "part 3;"]


async def test_stream_off_reads_an_event_stream_whole_as_before(
    runner: Runner, publish_tool: Callable[..., str], base: str
) -> None:
    tool = api_tool(publish_tool, {"url": f"{base}/sse?n=2", "stream": "off"})
    heard = Progress()
    async with Client(build_server(runner), mode="legacy") as c:
        result = ok(await c.call_tool("execute", {"action": "run", "item_id": tool}, progress_callback=heard))
    assert result["output"].startswith(": keep-alive")
    assert heard.seen == []


def test_publish_refuses_a_stream_the_primitive_does_not_know(publish_tool: Callable[..., str], base: str) -> None:
    with pytest.raises(Exception, match="stream"):
        api_tool(publish_tool, {"url": f"{base}/sse", "stream": "websocket"})
