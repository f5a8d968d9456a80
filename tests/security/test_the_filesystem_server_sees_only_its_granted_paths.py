"""A stdio MCP server sees only the host paths its sandbox grants, whatever it was told to serve.

The filesystem server refuses a path outside its allowed directories by itself, so a refused
outside path proved nothing about the sandbox. Here the server is told to serve a whole
directory while its sandbox grants only one folder in it: the server's own check lets a
sibling folder's file through (with the sandbox off, the same server reads it), and in the
sandbox the file is simply not there.
"""

from __future__ import annotations

import uuid
from collections.abc import AsyncIterator, Iterator
from pathlib import Path
from typing import Any

import psycopg
import pytest
from psycopg.types.json import Jsonb

from runner import McpPool, PostgresRegistry, Runner, admin, import_server, standard_dispatcher
from runner.handlers.mcp_tool import McpToolHandler
from tests.conftest import local_settings
from tests.mcp import FILESYSTEM, SANDBOX_READS, mcp_runner, stdio_server, unique

pytestmark = pytest.mark.slow

SECRET = f"sibling-secret-{uuid.uuid4().hex}"


@pytest.fixture
def published(conn: psycopg.Connection) -> Iterator[list[str]]:
    made: list[str] = []
    yield made
    for ref in reversed(made):
        conn.execute("delete from tools where executor_id = %s", (ref,))
        conn.execute("delete from tools where ref = %s", (ref,))


@pytest.fixture
async def runners(database_url: str, tmp_path: Path) -> AsyncIterator[tuple[Runner, McpToolHandler, Runner]]:
    sandboxed, handler = mcp_runner(database_url, tmp_path / "cache")
    settings = local_settings(database_url, tmp_path / "cache_off", sandbox=False)
    dispatcher = standard_dispatcher(mcp_pool=McpPool())
    off = Runner(PostgresRegistry(database_url, principal=admin()), settings, dispatcher=dispatcher)
    yield sandboxed, handler, off
    await sandboxed.aclose()
    await off.aclose()


async def test_a_path_the_server_would_serve_is_not_there_when_the_sandbox_does_not_grant_it(
    conn: psycopg.Connection,
    published: list[str],
    runners: tuple[Runner, McpToolHandler, Runner],
    tmp_path: Path,
) -> None:
    sandboxed, handler, off = runners
    served, sibling = tmp_path / "served", tmp_path / "sibling"
    served.mkdir()
    sibling.mkdir()
    (served / "note.txt").write_text("hello from kiwi\n")
    (sibling / "secret.txt").write_text(SECRET)
    # the server is told to serve all of tmp_path; its sandbox grants only the served folder
    sandbox = {"fs": {"read": SANDBOX_READS, "write": [str(served)]}}
    manifest: dict[str, Any] = stdio_server(unique("filesystem"), [str(FILESYSTEM), str(tmp_path)], sandbox=sandbox)
    conn.execute("select publish_tool_version(%s, '[]')", (Jsonb(manifest),))
    server = manifest["tool_id"]
    published.append(server)
    report = await import_server(sandboxed.registry, handler.pool, server, sandboxed.environ, sandboxed.sandbox)
    assert report.ok

    granted = await sandboxed.run(f"{server}.read_text_file", {"path": str(served / "note.txt")})
    assert granted.ok and "hello from kiwi" in str(granted.output), granted.error

    # the server's own check lets the sibling's file through: with the sandbox off it reads it
    unconfined = await off.run(f"{server}.read_text_file", {"path": str(sibling / "secret.txt")})
    assert unconfined.ok and SECRET in str(unconfined.output), unconfined.error

    # in the sandbox it is simply not there: not refused by the server's allowed directories
    confined = await sandboxed.run(f"{server}.read_text_file", {"path": str(sibling / "secret.txt")})
    said = f"{confined.output} {confined.error}"
    assert SECRET not in said
    assert "outside allowed directories" not in said and "Access denied" not in said, said
    assert "ENOENT" in said or "no such file" in said.lower() or "does not exist" in said.lower(), said
    listing = await sandboxed.run(f"{server}.list_directory", {"path": str(tmp_path)})
    assert listing.ok and "served" in str(listing.output) and "sibling" not in str(listing.output), listing.output
