"""Pagination declared in an http_client tool's config, through `kiwi run` and MCP `execute`
against a real local HTTP server: a page parameter, a cursor, a Link header and a next link in
the body, a page cap that says more remain, a next link to another origin refused, and a
paginate block publish refuses.
"""

from __future__ import annotations

from collections.abc import Callable, Iterator
from pathlib import Path
from typing import Any

import psycopg
import pytest
from mcp import Client

from runner import Runner, build_server
from tests.http_feeds import feeds
from tests.kiwi_cli import kiwi_env, run_kiwi
from tests.mcp_server.test_server import ok

pytestmark = pytest.mark.slow


@pytest.fixture(scope="module")
def served() -> Iterator[tuple[str, list[str]]]:
    with feeds() as found:
        yield found


def api_tool(publish_tool: Callable[..., str], config: dict[str, Any]) -> str:
    return publish_tool("paged", {"tool_type": "api", "executor": "http_client", "config": config})


async def execute(runner: Runner, tool: str) -> dict[str, Any]:
    async with Client(build_server(runner), mode="legacy") as c:
        return ok(await c.call_tool("execute", {"action": "run", "item_id": tool}))


def test_kiwi_run_follows_a_page_parameter_until_a_page_is_empty(
    publish_tool: Callable[..., str], served: tuple[str, list[str]], database_url: str, tmp_path: Path
) -> None:
    base, seen = served
    config = {"url": f"{base}/pages", "query": {"of": "3"}, "paginate": {"page_param": "page", "items": "$.items"}}
    tool = api_tool(publish_tool, config)
    done = run_kiwi(["run", tool, "--json"], cwd=tmp_path, env=kiwi_env(database_url, tmp_path / "cache"))
    assert done.code == 0, done.err
    assert done.json()["output"] == ["p1-a", "p1-b", "p2-a", "p2-b", "p3-a", "p3-b"]
    assert [p for p in seen if p.startswith("/pages")][-4:] == [f"/pages?of=3&page={n}" for n in (1, 2, 3, 4)]


async def test_a_cursor_goes_in_its_query_parameter_until_there_is_none(
    runner: Runner, publish_tool: Callable[..., str], served: tuple[str, list[str]]
) -> None:
    base, _ = served
    paginate = {"cursor": "$.next", "cursor_param": "cursor", "items": "$.data"}
    result = await execute(runner, api_tool(publish_tool, {"url": f"{base}/cursor", "paginate": paginate}))
    assert result["output"] == [{"at": "start"}, {"at": "c2"}, {"at": "c3"}]


async def test_the_link_header_leads_to_the_next_page(
    runner: Runner, publish_tool: Callable[..., str], served: tuple[str, list[str]]
) -> None:
    base, _ = served
    tool = api_tool(publish_tool, {"url": f"{base}/linked?p=1&of=3", "paginate": {"next_link": "header"}})
    result = await execute(runner, tool)
    assert result["output"] == [10, 11, 20, 21, 30, 31]


async def test_max_pages_stops_early_and_says_more_remain(
    runner: Runner, publish_tool: Callable[..., str], served: tuple[str, list[str]]
) -> None:
    base, _ = served
    config = {"url": f"{base}/linked?p=1&of=9", "paginate": {"next_link": "header", "max_pages": 2}}
    result = await execute(runner, api_tool(publish_tool, config))
    assert result["output"] == [10, 11, 20, 21]
    assert any("max_pages (2)" in w for w in result.get("warnings", [])), result


async def test_a_next_link_in_the_body_is_read_against_the_page(
    runner: Runner, publish_tool: Callable[..., str], served: tuple[str, list[str]]
) -> None:
    base, _ = served
    paginate = {"next_link": "$.next", "items": "$.results"}
    result = await execute(runner, api_tool(publish_tool, {"url": f"{base}/bodylink", "paginate": paginate}))
    assert result["output"] == [1, 2, 3]


async def test_a_next_link_to_another_origin_is_refused_and_never_requested(
    runner: Runner, publish_tool: Callable[..., str], served: tuple[str, list[str]]
) -> None:
    base, _ = served
    with feeds() as (elsewhere, seen_elsewhere):
        config = {
            "url": f"{base}/bodylink",
            "query": {"to": f"{elsewhere}/bodylink?p=3"},
            "headers": {"X-Api-Key": "${PAGED_KEY:-k3y-of-the-first-origin}"},
            "paginate": {"next_link": "$.next", "items": "$.results"},
        }
        async with Client(build_server(runner), mode="legacy") as c:
            answer = await c.call_tool("execute", {"action": "run", "item_id": api_tool(publish_tool, config)})
    assert answer.is_error
    text = " ".join(getattr(block, "text", "") for block in answer.content)
    assert "page 1" in text and "leaves" in text and "not followed" in text, text
    assert seen_elsewhere == []


def test_publish_refuses_a_paginate_key_the_primitive_does_not_know(
    publish_tool: Callable[..., str], served: tuple[str, list[str]]
) -> None:
    base, _ = served
    with pytest.raises(psycopg.Error, match="paginate"):
        api_tool(publish_tool, {"url": f"{base}/pages", "paginate": {"page_parameter": "page"}})
