"""Tests of the MCP client side (pool, handler, importer) against real MCP servers."""

from __future__ import annotations

import asyncio
import os
import signal
import socket
import sys
import time
import uuid
from pathlib import Path
from typing import Any

from runner import McpPool, PostgresRegistry, Runner, admin, standard_dispatcher
from runner.handlers.mcp_tool import McpToolHandler
from runner.primitives import procfs
from tests.conftest import local_settings

ROOT = Path(__file__).resolve().parents[2]
NODE_MODULES = ROOT / "node_modules"
EVERYTHING = NODE_MODULES / "@modelcontextprotocol/server-everything/dist/index.js"
FILESYSTEM = NODE_MODULES / "@modelcontextprotocol/server-filesystem/dist/index.js"


def unique(stem: str) -> str:
    return f"{stem}_{uuid.uuid4().hex[:8]}"


# What a test's stdio server reads in its sandbox: the project's node_modules, and for a
# Python server the interpreter, the project's virtualenv and the test fixtures.
SANDBOX_READS = [str(NODE_MODULES)]
PYTHON_READS = [sys.base_prefix, str(ROOT / ".venv"), str(ROOT / "tests")]


def stdio_server(tool_id: str, args: list[str], **config: Any) -> dict[str, Any]:
    """An mcp_server manifest running `node <args>` through the subprocess primitive, its
    sandbox reading node_modules (tests publish it as an admin, who may grant that)."""
    reads = PYTHON_READS if config.get("command") == sys.executable else SANDBOX_READS
    sandbox = {"fs": {"read": reads}}
    return {
        "tool_id": tool_id,
        "tool_type": "mcp_server",
        "executor": "subprocess",
        "version": "1.0.0",
        "description": "a test MCP server",
        "config": {"transport": "stdio", "command": "node", "args": args, "sandbox": sandbox, **config},
    }


def mcp_runner(database_url: str, cache_dir: Path) -> tuple[Runner, McpToolHandler]:
    """A Runner as `kiwi serve` makes it (the standard handlers, over an MCP pool it shares with
    the server's imports: build_server(runner, mcp_pool=handler.pool)), and its MCP handler."""
    settings = local_settings(database_url, cache_dir)
    environ = {**os.environ, "KIWI_NODE_MODULES": str(NODE_MODULES)}
    dispatcher = standard_dispatcher(mcp_pool=McpPool())
    runner = Runner(PostgresRegistry(database_url, principal=admin()), settings, dispatcher=dispatcher, environ=environ)
    (handler,) = [h for h in runner.dispatcher.handlers if isinstance(h, McpToolHandler)]
    return runner, handler


def free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return int(s.getsockname()[1])


def alive(pid: int) -> bool:
    """Running (a zombie does not count)."""
    entry = procfs.stat(pid)
    return entry is not None and entry.alive


def children() -> set[int]:
    """This process's live children."""
    me = os.getpid()
    return {p.pid for p in procfs.processes() if p.ppid == me and p.alive}


async def killed(pool: McpPool, key: str) -> int:
    """SIGKILL the server of the pool's session `key`, then wait until the pool has seen its
    connection end; its pid."""
    session = pool.session_for(key)
    assert session is not None and session.pid is not None
    os.kill(session.pid, signal.SIGKILL)
    deadline = time.monotonic() + 10
    while session.usable and time.monotonic() < deadline:
        await asyncio.sleep(0.01)
    assert not session.usable
    return session.pid
