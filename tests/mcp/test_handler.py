"""mcp_tool plans run end to end (registry rows -> Runner -> pool -> real MCP servers):
everything over stdio and over streamable HTTP, filesystem on a temporary folder."""

from __future__ import annotations

import asyncio
import contextlib
import os
import signal
import socket
import subprocess
import time
from collections.abc import AsyncIterator, Callable, Iterator
from pathlib import Path
from typing import Any

import psycopg
import pytest
from psycopg.types.json import Jsonb

from runner import ConfigError, Runner, import_server
from runner.handlers.mcp_tool import McpToolHandler
from runner.mcp_client.pool import live_server_pids
from runner.primitives import procfs
from tests.kiwi_cli import kiwi_env, run_kiwi

from . import (
    EVERYTHING,
    FILESYSTEM,
    NODE_MODULES,
    SANDBOX_READS,
    alive,
    children,
    free_port,
    killed,
    mcp_runner,
    stdio_server,
    unique,
)

Publish = Callable[[dict[str, Any]], str]


@pytest.fixture
def publish(conn: psycopg.Connection) -> Iterator[Publish]:
    """Publish manifests as given; afterwards delete them and every tool they execute."""
    made: list[str] = []

    def go(manifest: dict[str, Any]) -> str:
        conn.execute("select publish_tool_version(%s, '[]')", (Jsonb(manifest),))
        made.append(manifest["tool_id"])
        return str(manifest["tool_id"])

    yield go
    for ref in reversed(made):
        conn.execute("delete from tools where executor_id = %s", (ref,))
        conn.execute("delete from tools where ref = %s", (ref,))


@pytest.fixture
async def mcp(database_url: str, tmp_path: Path) -> AsyncIterator[tuple[Runner, McpToolHandler]]:
    runner, handler = mcp_runner(database_url, tmp_path / "cache")
    yield runner, handler
    await runner.aclose()


def mcp_tool(server: str, name: str, **extra: Any) -> dict[str, Any]:
    return {"tool_id": f"{server}.{name}", "tool_type": "mcp_tool", "executor": server, "version": "1.0.0", **extra}


@pytest.fixture
def everything_server(publish: Publish) -> str:
    return publish(stdio_server(unique("everything"), [str(EVERYTHING), "stdio"]))


async def test_an_imported_stdio_tool_runs_by_its_server_dot_tool_id(
    mcp: tuple[Runner, McpToolHandler], everything_server: str
) -> None:
    runner, handler = mcp
    await import_server(runner.registry, handler.pool, everything_server, runner.environ)
    result = await runner.run(f"{everything_server}.echo", {"message": "hi"})
    assert (result.status, result.output, result.error) == ("success", "Echo: hi", None)
    assert result.executor_chain == [f"{everything_server}.echo", everything_server, "subprocess"]
    structured = await runner.run(f"{everything_server}.get-structured-content", {"location": "New York"})
    assert structured.status == "success" and set(structured.output) == {"temperature", "conditions", "humidity"}


async def test_the_seeded_everything_server_runs_from_node_modules(
    mcp: tuple[Runner, McpToolHandler], publish: Publish
) -> None:
    runner, _ = mcp
    tool = publish(mcp_tool("everything_mcp", unique("echo"), config={"tool": "echo"}))
    result = await runner.run(tool, {"message": "seeded"})
    assert result.output == "Echo: seeded", result.error


async def test_an_mcp_tool_error_is_an_error_result(mcp: tuple[Runner, McpToolHandler], publish: Publish) -> None:
    runner, _ = mcp
    server = publish(stdio_server(unique("everything"), [str(EVERYTHING), "stdio"]))
    tool = publish(mcp_tool(server, "echo"))  # no parameter schema: the server itself refuses
    result = await runner.run(tool, {})
    assert result.status == "error" and "message" in (result.error or "")


async def test_a_call_over_its_timeout_is_status_timeout(mcp: tuple[Runner, McpToolHandler], publish: Publish) -> None:
    runner, _ = mcp
    server = publish(stdio_server(unique("everything"), [str(EVERYTHING), "stdio"]))
    tool = publish(mcp_tool(server, "slow", config={"tool": "trigger-long-running-operation", "timeout_s": 0.3}))
    result = await runner.run(tool, {"duration": 5, "steps": 1})
    assert result.status == "timeout", result.error


async def test_a_killed_server_is_restarted_and_the_next_run_succeeds(
    mcp: tuple[Runner, McpToolHandler], everything_server: str, publish: Publish
) -> None:
    runner, handler = mcp
    tool = publish(mcp_tool(everything_server, "echo"))
    assert (await runner.run(tool, {"message": "one"})).ok
    pid = await kill_server(runner, handler, tool)
    result = await runner.run(tool, {"message": "two"})
    assert result.output == "Echo: two" and result.detail["attempts"] == 1 and "connect_ms" in result.detail
    assert not alive(pid)


async def kill_server(runner: Runner, handler: McpToolHandler, tool: str, after_s: float = 0) -> int:
    """SIGKILL the server of `tool` (after `after_s`), then wait until the pool has seen its
    connection end."""
    await asyncio.sleep(after_s)
    return await killed(handler.pool, handler.spec_of(runner, await runner.plan(tool)).key)


@pytest.mark.parametrize(
    ("config", "repeated"),
    [
        ({}, False),
        ({"annotations": {"readOnlyHint": False, "idempotentHint": False}}, False),
        ({"annotations": {"readOnlyHint": True}}, True),
        ({"annotations": {"idempotentHint": True}}, True),
        ({"annotations": {"readOnlyHint": True}, "idempotent": False}, False),
        ({"idempotent": True}, True),
    ],
)
async def test_a_run_cut_off_by_its_servers_death_is_repeated_only_when_the_tool_allows_it(
    mcp: tuple[Runner, McpToolHandler], everything_server: str, publish: Publish, config: dict[str, Any], repeated: bool
) -> None:
    """config.idempotent decides, else the upstream annotations (as `kiwi mcp import` stores
    them): a tool that is neither read-only nor idempotent may have acted, so it is not run
    twice behind the caller's back."""
    runner, handler = mcp
    tool = publish(mcp_tool(everything_server, "trigger-long-running-operation", config=config))
    assert (await runner.run(tool, {"duration": 0.1, "steps": 1})).ok
    killer = asyncio.create_task(kill_server(runner, handler, tool, after_s=0.5))
    result = await runner.run(tool, {"duration": 1.5, "steps": 1})
    await killer
    if repeated:
        assert result.ok and result.detail["attempts"] == 2, result.error
    else:
        assert result.status == "error" and "may have run, so the call was not repeated" in (result.error or "")
    assert (await runner.run(tool, {"duration": 0.1, "steps": 1})).ok, "the next run reconnects"


async def test_config_idempotent_must_be_a_boolean(everything_server: str, publish: Publish) -> None:
    # refused when published now (the mcp_tool type's config contract, tool_type_rules.config_schema)
    with pytest.raises(psycopg.errors.InvalidParameterValue, match=r"config\.idempotent: must be true or false"):
        publish(mcp_tool(everything_server, "echo", config={"idempotent": "yes"}))


async def test_200_concurrent_proxied_calls_all_succeed(
    mcp: tuple[Runner, McpToolHandler], everything_server: str, publish: Publish
) -> None:
    runner, _ = mcp
    tool = publish(mcp_tool(everything_server, "echo"))
    before = live_server_pids()
    results = await asyncio.gather(*(runner.run(tool, {"message": f"m{i}"}) for i in range(200)))
    assert [r.error for r in results if not r.ok] == []
    assert [r.output for r in results] == [f"Echo: m{i}" for i in range(200)]
    assert len(live_server_pids() - before) == 1


async def test_runner_aclose_leaves_no_server_running(database_url: str, tmp_path: Path, publish: Publish) -> None:
    server = publish(stdio_server(unique("everything"), [str(EVERYTHING), "stdio"]))
    tool = publish(mcp_tool(server, "echo"))
    runner, _ = mcp_runner(database_url, tmp_path)
    before = children()
    assert (await runner.run(tool, {"message": "hi"})).ok
    (pid,) = children() - before
    await runner.aclose()
    assert not alive(pid)


async def test_parameters_never_reach_the_command(
    mcp: tuple[Runner, McpToolHandler], publish: Publish, tmp_path: Path
) -> None:
    runner, _ = mcp
    server = publish(stdio_server(unique("everything"), [str(EVERYTHING), "stdio"]))
    tool = publish(mcp_tool(server, "echo"))
    marker = tmp_path / "pwned"
    sneaky = {"message": "x", "command": "touch", "args": [str(marker)], "transport": "stdio", "env": {"X": "1"}}
    before = live_server_pids()
    result = await runner.run(tool, sneaky)
    assert result.ok and not marker.exists()
    (pid,) = live_server_pids() - before
    # the server's own argv ends its sandbox's command line, exactly as published
    assert (procfs.cmdline(pid) or [])[-2:] == [str(EVERYTHING), "stdio"]
    # A {placeholder} in a server's command is never filled from parameters.
    templated = publish(stdio_server(unique("templated"), [str(EVERYTHING), "{message}"]))
    echo = publish(mcp_tool(templated, "echo"))
    refused = await runner.run(echo, {"message": "stdio"})
    assert refused.status == "error" and isinstance(refused.failure, ConfigError)


@contextlib.contextmanager
def everything_over(mode: str, path: str, port: int | None = None) -> Iterator[str]:
    """server-everything in `mode` (streamableHttp or sse) on `port` (a free one by default); its URL."""
    port = port or free_port()
    proc = subprocess.Popen(
        ["node", str(EVERYTHING), mode],
        env={**os.environ, "PORT": str(port)},
        stdout=subprocess.DEVNULL,
        stderr=subprocess.PIPE,
        start_new_session=True,
    )
    try:
        deadline = time.monotonic() + 20
        while time.monotonic() < deadline:
            try:
                with socket.create_connection(("127.0.0.1", port), timeout=0.2):
                    break
            except OSError:
                time.sleep(0.1)
        else:
            pytest.fail(f"server-everything ({mode}) did not listen")
        yield f"http://127.0.0.1:{port}{path}"
    finally:
        os.killpg(proc.pid, signal.SIGKILL)
        proc.wait()


def remote_server(stem: str, transport: str, url: str) -> dict[str, Any]:
    """An mcp_server manifest for a server reached over HTTP (streamable_http or sse)."""
    return {
        "tool_id": unique(stem),
        "tool_type": "mcp_server",
        "executor": "http_client",
        "version": "1.0.0",
        "config": {"transport": transport, "url": url},
    }


@pytest.fixture
def http_everything() -> Iterator[str]:
    with everything_over("streamableHttp", "/mcp") as url:
        yield url


@pytest.fixture
def sse_everything() -> Iterator[str]:
    with everything_over("sse", "/sse") as url:
        yield url


async def test_a_restarted_remote_server_gets_a_new_session_and_a_stopped_one_says_so(
    mcp: tuple[Runner, McpToolHandler], publish: Publish
) -> None:
    """Regression: after a streamable-HTTP server restarted, it refused the old session id
    (400) on every call and the pool never reconnected. A request the server turned away,
    or that could not connect at all, did not run: it is retried on a new session, even for
    a tool that is not repeatable."""
    runner, handler = mcp
    port = free_port()
    with everything_over("streamableHttp", "/mcp", port) as url:
        server = publish(remote_server("http_everything", "streamable_http", url))
        tool = publish(mcp_tool(server, "echo"))  # no annotations: never repeated once it may have run
        assert (await runner.run(tool, {"message": "one"})).ok
    with everything_over("streamableHttp", "/mcp", port):
        again = await runner.run(tool, {"message": "two"})
        assert again.output == "Echo: two", again.error
        assert again.detail["attempts"] == 2 and "connect_ms" in again.detail
    down = await runner.run(tool, {"message": "three"})
    assert down.status == "error" and "may have run" not in (down.error or "")
    assert f"connecting to MCP server {server} failed" in (down.error or "")
    with everything_over("streamableHttp", "/mcp", port):
        assert (await runner.run(tool, {"message": "four"})).output == "Echo: four"
    with everything_over("streamableHttp", "/mcp", port):  # tools/list on the stale session too
        report = await import_server(runner.registry, handler.pool, server, runner.environ)
        assert report.ok and report.counts()["created"] > 5


async def test_a_remote_sse_server_runs_through_the_pool(
    mcp: tuple[Runner, McpToolHandler], publish: Publish, sse_everything: str
) -> None:
    runner, handler = mcp
    server = publish(remote_server("sse_everything", "sse", sse_everything))
    report = await import_server(runner.registry, handler.pool, server, runner.environ)
    assert report.ok and report.counts()["created"] > 5
    result = await runner.run(f"{server}.echo", {"message": "over sse"})
    assert (result.output, result.detail["transport"]) == ("Echo: over sse", "sse")
    results = await asyncio.gather(*(runner.run(f"{server}.echo", {"message": f"m{i}"}) for i in range(20)))
    assert all(r.ok for r in results)


async def test_a_remote_streamable_http_server_runs_through_the_pool(
    mcp: tuple[Runner, McpToolHandler], publish: Publish, http_everything: str
) -> None:
    runner, handler = mcp
    server = publish(
        {
            "tool_id": unique("remote_everything"),
            "tool_type": "mcp_server",
            "executor": "http_client",
            "version": "1.0.0",
            "config": {"transport": "streamable_http", "url": http_everything, "headers": {"X-Test": "kiwi"}},
        }
    )
    report = await import_server(runner.registry, handler.pool, server, runner.environ)
    assert report.ok and report.counts()["created"] > 5
    result = await runner.run(f"{server}.echo", {"message": "over http"})
    assert (result.output, result.detail["transport"]) == ("Echo: over http", "streamable_http")
    results = await asyncio.gather(*(runner.run(f"{server}.echo", {"message": f"m{i}"}) for i in range(50)))
    assert all(r.ok for r in results)


async def test_the_filesystem_server_lists_and_reads_a_temporary_folder(
    mcp: tuple[Runner, McpToolHandler], publish: Publish, tmp_path: Path
) -> None:
    runner, handler = mcp
    root = tmp_path / "files"
    root.mkdir()
    (root / "note.txt").write_text("hello from kiwi\n")
    # the server's sandbox writes only the folder it serves (and reads its own code)
    sandbox = {"fs": {"read": SANDBOX_READS, "write": [str(root)]}}
    server = publish(stdio_server(unique("filesystem"), [str(FILESYSTEM), str(root)], sandbox=sandbox))
    report = await import_server(runner.registry, handler.pool, server, runner.environ, runner.sandbox)
    assert report.ok
    listing = await runner.run(f"{server}.list_directory", {"path": str(root)})
    assert listing.ok and "note.txt" in str(listing.output), listing.error
    read = await runner.run(f"{server}.read_text_file", {"path": str(root / "note.txt")})
    assert read.ok and "hello from kiwi" in str(read.output), read.error
    outside = await runner.run(f"{server}.read_text_file", {"path": "/etc/hostname"})
    assert outside.status == "error"


def test_kiwi_run_of_an_mcp_tool_leaves_no_server_behind(database_url: str, publish: Publish, tmp_path: Path) -> None:
    """The kiwi command skips the interpreter's teardown on exit: the pool must still have
    ended its server. The server runs in a folder of its own, so any survivor is found."""
    home = tmp_path / "server_home"
    home.mkdir()
    server = publish(stdio_server(unique("everything"), [str(EVERYTHING), "stdio"], cwd=str(home)))
    tool = publish(mcp_tool(server, "echo"))
    env = kiwi_env(database_url, tmp_path / "cache", KIWI_NODE_MODULES=str(NODE_MODULES))
    done = run_kiwi(["run", tool, "-p", "message=hi"], cwd=tmp_path, env=env)
    assert done.code == 0 and done.out.strip() == "Echo: hi", done.err

    def in_home() -> list[int]:
        found = []
        for p in procfs.processes():
            with contextlib.suppress(OSError):
                if p.alive and os.readlink(f"/proc/{p.pid}/cwd") == str(home):
                    found.append(p.pid)
        return found

    deadline = time.monotonic() + 5
    while in_home() and time.monotonic() < deadline:
        time.sleep(0.05)
    assert in_home() == []
