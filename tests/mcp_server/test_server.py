"""Kiwi's MCP server through the SDK's own client: in memory, over stdio and over streamable HTTP.

No mocks: the real database, real runs, real processes. Tools published here get unique ids
and are deleted afterwards.
"""

from __future__ import annotations

import argparse
import asyncio
import os
import sys
import time
import uuid
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import Any

import psycopg
import pytest
from mcp import Client
from mcp.client.stdio import StdioServerParameters
from mcp.server.mcpserver import MCPServer
from mcp_types import CallToolResult

from runner import Runner, build_server
from runner.cli.serve import add_serve_command
from runner.mcp_server.server import ACTIONS, ITEM_TYPES
from runner.testing.http_serving import kiwi_http_server, mcp_client, user_token
from tests.conftest import runner_url

ROOT = Path(__file__).resolve().parents[2]


@pytest.fixture
def tool_ids(conn: psycopg.Connection) -> Iterator[list[str]]:
    """Ids of tools a test publishes through the server; whatever is left is deleted afterwards."""
    made: list[str] = []
    yield made
    for tool_id in reversed(made):
        conn.execute("delete from tools where ref = %s", (tool_id,))


def unique(stem: str) -> str:
    return f"{stem}_{uuid.uuid4().hex[:8]}"


def mine(stem: str) -> str:
    """A new tool's reference in the namespace of the local owner, whom the server acts as (an
    agent publishes there; `public` is an admin's)."""
    return f"local/{unique(stem)}"


def text(result: CallToolResult) -> str:
    return "\n".join(getattr(block, "text", "") for block in result.content)


def ok(result: CallToolResult) -> dict[str, Any]:
    assert not result.is_error, text(result)
    assert result.structured_content is not None
    return result.structured_content


def failed(result: CallToolResult, *words: str) -> str:
    """The error's text, once checked: a tool error that names what went wrong and gives a hint."""
    assert result.is_error, text(result)
    body = text(result)
    assert "hint:" in body, body
    for word in words:
        assert word in body, body
    return body


def bash_tool(tool_id: str, script: str, *, version: str = "1.0.0", **manifest: Any) -> dict[str, Any]:
    return {
        "manifest": {
            "tool_id": tool_id,
            "tool_type": "script",
            "executor": "bash_runtime",
            "version": version,
            "description": "A throwaway tool of tests/mcp_server.",
            "entrypoint": "main.sh",
            **manifest,
        },
        "files": [{"path": "main.sh", "content_text": script, "is_entrypoint": True}],
    }


# --- the surface ---------------------------------------------------------------------------


async def test_the_server_lists_four_tools_with_schemas_an_llm_can_follow(server: MCPServer) -> None:
    async with Client(server) as client:
        tools = {t.name: t for t in (await client.list_tools()).tools}
        assert set(tools) == {"search", "load", "execute", "help"}
        for tool in tools.values():
            assert tool.description and tool.input_schema["type"] == "object"
            for name, prop in tool.input_schema["properties"].items():
                assert prop.get("description"), f"{tool.name}.{name} has no description"
        execute = tools["execute"].input_schema
        assert execute["required"] == ["action"]
        assert execute["properties"]["action"]["enum"] == list(ACTIONS)
        assert tools["load"].input_schema["required"] == ["item_id"]
        for name in ("search", "load"):
            assert [v for v in tools[name].input_schema["properties"]["item_type"]["enum"] if v] == list(ITEM_TYPES)
        assert tools["search"].annotations is not None and tools["search"].annotations.read_only_hint
        assert tools["execute"].annotations is not None and tools["execute"].annotations.destructive_hint


async def test_help_explains_the_whole_surface(server: MCPServer) -> None:
    async with Client(server) as client:
        guide = text(await client.call_tool("help", {}))
        for word in ("search", "load", "execute", "dry_run", "delete", "confirm", "type:", "mcp:", "namespace:"):
            assert word in guide
        for item_type in ITEM_TYPES:
            assert item_type in guide
        section = ok(await client.call_tool("help", {"topic": "errors"}))
        assert section["topic"] == "errors" and "hint" in section["text"]
        failed(await client.call_tool("help", {"topic": "everything"}), "unknown help topic")


# --- search and load -----------------------------------------------------------------------


async def test_search_finds_hello_world(server: MCPServer) -> None:
    async with Client(server) as client:
        found = ok(await client.call_tool("search", {"query": "hello"}))
        first = found["items"][0]
        assert first["item_id"] == "hello_world" and first["item_type"] == "tool" and first["tool_type"] == "script"
        assert "hello_world" in text(await client.call_tool("search", {"query": "hello"}))


async def test_search_honours_type_modifiers_and_item_types(server: MCPServer) -> None:
    async with Client(server) as client:
        runtimes = ok(await client.call_tool("search", {"query": "type:runtime"}))["items"]
        assert runtimes and {i["tool_type"] for i in runtimes} == {"runtime"}
        on_bash = ok(await client.call_tool("search", {"query": "type:bash hello"}))["items"]
        assert [i["item_id"] for i in on_bash] == ["hello_world"]
        knowledge = ok(await client.call_tool("search", {"query": "", "item_type": "knowledge"}))["items"]
        assert knowledge and {i["item_type"] for i in knowledge} == {"knowledge"}
        tools = ok(await client.call_tool("search", {"query": "", "item_type": "tool", "limit": 5}))["items"]
        assert len(tools) == 5 and not {i["tool_type"] for i in tools} & {"directive", "knowledge"}
        unknown = ok(await client.call_tool("search", {"query": "zzqxvw"}))  # no tool has the word
        assert {i["matched_by"] for i in unknown["items"]} <= {"meaning"}


async def test_a_search_by_words_only_that_finds_nothing_says_so(runner: Runner) -> None:
    async with Client(build_server(runner, embedder=None)) as client:  # embeddings off
        none = await client.call_tool("search", {"query": "zzqxvw"})
        assert ok(none)["count"] == 0 and "no items found" in text(none)
        assert ok(none)["search_mode"].startswith("lexical")


async def test_load_returns_the_chain_parameters_and_files(server: MCPServer) -> None:
    async with Client(server) as client:
        loaded = ok(await client.call_tool("load", {"item_id": "hello_world"}))
        assert [c["tool_id"] for c in loaded["executor_chain"]] == ["hello_world", "bash_runtime", "subprocess"]
        assert loaded["parameters"]["properties"]["name"]["type"] == "string"
        assert loaded["manifest"]["tool_id"] == "hello_world" and loaded["item_type"] == "tool"
        [file] = loaded["files"]
        assert file["path"] == "hello.sh" and len(file["sha256"]) == 64 and "content_text" not in file
        with_text = ok(await client.call_tool("load", {"item_id": "hello_world@1.0.0", "include_content": True}))
        assert "KIWI_PARAM_NAME" in with_text["files"][0]["content_text"]


async def test_load_gives_the_text_of_knowledge_and_checks_the_item_type(server: MCPServer) -> None:
    async with Client(server) as client:
        loaded = ok(await client.call_tool("load", {"item_id": "kiwi_tool_authoring", "item_type": "knowledge"}))
        assert loaded["executor_chain"][0]["tool_id"] == "kiwi_tool_authoring" and len(loaded["executor_chain"]) == 1
        assert loaded["files"][0]["content_text"]
        failed(await client.call_tool("load", {"item_id": "hello_world", "item_type": "directive"}), "not a directive")


# --- execute: run and dry_run --------------------------------------------------------------


async def test_execute_run_returns_the_structured_result(server: MCPServer) -> None:
    async with Client(server) as client:
        result = await client.call_tool(
            "execute", {"action": "run", "item_id": "hello_world", "parameters": {"name": "Ada"}}
        )
        run = ok(result)
        assert run["status"] == "success" and run["output"] == {"greeting": "Hello, Ada!"}
        assert run["executor_chain"] == ["hello_world", "bash_runtime", "subprocess"]
        assert set(run) == {
            "tool_id",
            "version",
            "status",
            "output",
            "error",
            "exit_code",
            "duration_ms",
            "executor_chain",
        }
        assert "Hello, Ada!" in text(result)


async def test_dry_run_returns_the_chain_and_validation_without_running(
    server: MCPServer, publish_tool: Callable[..., str], tmp_path: Path
) -> None:
    # The tool touches its marker in a directory its sandbox is granted: published by an
    # admin (publish_tool), since an agent's own tool cannot be granted a host path, and
    # writable by the sandbox's user (nobody).
    marks = tmp_path / "marks"
    marks.mkdir()
    marks.chmod(0o777)
    tool_id = publish_tool(
        "mcp_marker",
        {
            "tool_type": "script",
            "executor": "bash_runtime",
            "parameters": [{"name": "marker", "type": "string", "required": True}],
            "config": {"sandbox": {"fs": {"write": [str(marks)]}}},
        },
        {"main.sh": 'touch "$KIWI_PARAM_MARKER"\necho \'{"touched": true}\'\n'},
        entrypoint="main.sh",
    )
    async with Client(server) as client:
        marker = marks / "ran"
        dry = ok(
            await client.call_tool(
                "execute", {"action": "dry_run", "item_id": tool_id, "parameters": {"marker": str(marker)}}
            )
        )
        assert dry["dry_run"] is True and dry["executor_chain"] == [tool_id, "bash_runtime", "subprocess"]
        assert dry["validation"]["passed"] is True
        assert not marker.exists(), "a dry run ran the tool"
        bad = await client.call_tool("execute", {"action": "dry_run", "item_id": tool_id, "parameters": {}})
        failed(bad, "marker")
        assert bad.structured_content and bad.structured_content["validation"]["passed"] is False
        ran = ok(
            await client.call_tool(
                "execute", {"action": "run", "item_id": tool_id, "parameters": {"marker": str(marker)}}
            )
        )
        assert ran["output"] == {"touched": True} and marker.exists()


# --- execute: create, update, publish, delete ----------------------------------------------


async def test_create_update_publish_and_delete_round_trip(server: MCPServer, tool_ids: list[str]) -> None:
    async with Client(server) as client:
        tool_id = mine("mcp_round_trip")
        tool_ids.append(tool_id)
        v1 = bash_tool(tool_id, "echo '{\"v\": 1}'\n")
        v2 = bash_tool(tool_id, "echo '{\"v\": 2}'\n", version="1.1.0")

        failed(await client.call_tool("execute", {"action": "update", **v1}), "does not exist", "create")
        created = ok(await client.call_tool("execute", {"action": "create", "item_id": tool_id, **v1}))
        assert created["tool_id"] == tool_id and created["version"] == "1.0.0"
        failed(await client.call_tool("execute", {"action": "create", **v1}), "already exists", "update")
        ok(await client.call_tool("execute", {"action": "update", **v2}))
        again = ok(await client.call_tool("execute", {"action": "publish", **v2}))
        assert again.get("unchanged") is True
        run = ok(await client.call_tool("execute", {"action": "run", "item_id": tool_id}))
        assert run["output"] == {"v": 2} and run["version"] == "1.1.0"
        old = ok(await client.call_tool("execute", {"action": "run", "item_id": f"{tool_id}@1.0.0"}))
        assert old["output"] == {"v": 1}

        ask = await client.call_tool("execute", {"action": "delete", "item_id": tool_id})
        asked = ok(ask)
        assert asked["deleted"] is False and asked["confirm_required"] is True and "confirm=true" in text(ask)
        ok(await client.call_tool("load", {"item_id": tool_id}))  # still there
        deleted = ok(await client.call_tool("execute", {"action": "delete", "item_id": tool_id, "confirm": True}))
        assert deleted["deleted"] is True and deleted["versions"] == 2
        failed(await client.call_tool("load", {"item_id": tool_id}), "not found")


async def test_publish_takes_a_manifest_as_tool_yaml_text(server: MCPServer, tool_ids: list[str]) -> None:
    async with Client(server) as client:
        tool_id = mine("mcp_yaml")
        tool_ids.append(tool_id)
        manifest = (
            f"tool_id: {tool_id}\ntool_type: script\nexecutor: bash_runtime\nversion: 1.0.0\nentrypoint: main.sh\n"
        )
        files = [{"path": "main.sh", "content_text": "echo yaml\n", "is_entrypoint": True}]
        ok(await client.call_tool("execute", {"action": "publish", "manifest": manifest, "files": files}))
        assert ok(await client.call_tool("execute", {"action": "run", "item_id": tool_id}))["output"] == "yaml"


async def test_delete_is_refused_while_other_tools_execute_on_it(server: MCPServer) -> None:
    async with Client(server) as client:
        failed(await client.call_tool("execute", {"action": "delete", "item_id": "bash_runtime", "confirm": True}))
        ok(await client.call_tool("load", {"item_id": "bash_runtime"}))


# --- errors --------------------------------------------------------------------------------


async def test_every_failure_is_a_tool_error_with_a_hint_and_the_server_keeps_answering(server: MCPServer) -> None:
    async with Client(server) as client:
        cases: list[tuple[str, dict[str, Any], tuple[str, ...]]] = [
            ("execute", {"action": "run", "item_id": "no_such_tool_zz"}, ("not found",)),
            ("execute", {"action": "run", "item_id": "hello_world", "parameters": {"name": 5}}, ("name",)),
            ("execute", {"action": "explode", "item_id": "hello_world"}, ("unknown action",)),
            ("execute", {"action": "run"}, ("no item_id",)),
            ("execute", {"action": "create", "manifest": {"tool_id": "x_zz"}}, ("tool_type", "version")),
            ("execute", {"action": "create"}, ("needs a manifest",)),
            ("execute", {"action": "publish", "manifest": "tool_id: [unclosed"}, ("YAML",)),
            ("execute", {"action": "create", "item_id": "a_zz", "manifest": {"tool_id": "b_zz"}}, ("does not match",)),
            ("execute", {"action": "delete", "item_id": "no_such_tool_zz"}, ("not found",)),
            ("search", {"query": "x", "item_type": "widget"}, ("unknown item_type",)),
            ("load", {"item_id": "hello_world", "version": "9.9.9"}, ()),
        ]
        for tool, args, words in cases:
            failed(await client.call_tool(tool, args), *words)
            assert ok(await client.call_tool("search", {"query": "hello"}))["count"] >= 1
        bad_args = await client.call_tool("search", {"limit": "many"})  # the SDK's own input validation
        assert bad_args.is_error
        unknown = await client.call_tool("no_such_meta_tool", {})
        assert unknown.is_error
        assert ok(await client.call_tool("help", {"topic": "overview"}))


async def test_an_unexpected_exception_is_a_tool_error_not_a_protocol_crash(runner: Runner) -> None:
    async def broken_delete(tool_id: str) -> dict[str, Any]:
        raise RuntimeError(f"the disk fell off while deleting {tool_id}")

    async with Client(build_server(runner, delete=broken_delete)) as c:
        failed(await c.call_tool("execute", {"action": "delete", "item_id": "hello_world", "confirm": True}), "bug")
        assert ok(await c.call_tool("load", {"item_id": "hello_world"}))


async def test_a_long_run_neither_hangs_nor_blocks_the_server(runner: Runner, tool_ids: list[str]) -> None:
    tool_id = mine("mcp_sleeper")
    tool_ids.append(tool_id)
    async with Client(build_server(runner, run_timeout_s=1.5)) as c:
        ok(
            await c.call_tool(
                "execute", {"action": "create", **bash_tool(tool_id, "sleep 30\n", config={"timeout_s": 60})}
            )
        )
        started = time.perf_counter()
        slow = asyncio.ensure_future(c.call_tool("execute", {"action": "run", "item_id": tool_id}))
        await asyncio.sleep(0.3)
        assert ok(await c.call_tool("search", {"query": "hello"}))["count"] >= 1  # answered meanwhile
        assert not slow.done()
        failed(await slow, "did not finish")
        assert time.perf_counter() - started < 10
        assert ok(await c.call_tool("search", {"query": "hello"}))["count"] >= 1


# --- transports ----------------------------------------------------------------------------


def server_env(database_url: str, cache_dir: Path) -> dict[str, str]:
    return {**os.environ, "KIWI_DATABASE_URL": runner_url(database_url), "KIWI_CACHE_DIR": str(cache_dir)}


async def test_over_stdio(database_url: str, tmp_path: Path) -> None:
    params = StdioServerParameters(
        command=sys.executable,
        args=["-m", "runner.cli.serve", "--transport", "stdio"],
        env=server_env(database_url, tmp_path),
        cwd=str(ROOT),
    )
    async with Client(params) as c:
        assert {t.name for t in (await c.list_tools()).tools} == {"search", "load", "execute", "help"}
        run = ok(
            await c.call_tool("execute", {"action": "run", "item_id": "hello_world", "parameters": {"name": "Ada"}})
        )
        assert run["output"] == {"greeting": "Hello, Ada!"}
        failed(await c.call_tool("execute", {"action": "run", "item_id": "no_such_tool_zz"}), "not found")
        assert ok(await c.call_tool("search", {"query": "type:bash hello"}))["items"][0]["item_id"] == "hello_world"


@pytest.fixture
def http_server(database_url: str, tmp_path: Path) -> Iterator[str]:
    """`kiwi serve --transport http` on a free port (clients sign in: see test_http_auth.py)."""
    with kiwi_http_server(database_url, tmp_path) as served:
        yield served.url


async def test_over_streamable_http(http_server: str) -> None:
    async with mcp_client(http_server, user_token()) as c:
        assert {t.name for t in (await c.list_tools()).tools} == {"search", "load", "execute", "help"}
        run = ok(
            await c.call_tool("execute", {"action": "run", "item_id": "hello_world", "parameters": {"name": "Ada"}})
        )
        assert run["output"] == {"greeting": "Hello, Ada!"}
        failed(await c.call_tool("load", {"item_id": "no_such_tool_zz"}), "not found")
        assert ok(await c.call_tool("load", {"item_id": "hello_world"}))["parameters"]["properties"]["name"]


def test_serve_command_parses_its_options() -> None:
    parser = argparse.ArgumentParser(prog="kiwi")
    add_serve_command(parser.add_subparsers(dest="command", required=True))
    args = parser.parse_args(["serve", "--transport", "http", "--host", "0.0.0.0", "--port", "9001"])
    assert (args.transport, args.host, args.port) == ("http", "0.0.0.0", 9001) and callable(args.handler)
    assert parser.parse_args(["serve"]).transport == "stdio"
    with pytest.raises(SystemExit):
        parser.parse_args(["serve", "--transport", "carrier-pigeon"])
