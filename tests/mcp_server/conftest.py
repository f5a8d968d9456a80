"""Fixtures shared by the MCP server tests: one runner as the local owner, and the server over it."""

from __future__ import annotations

from collections.abc import AsyncIterator
from pathlib import Path

import pytest
from mcp.server.mcpserver import MCPServer

from runner import PostgresRegistry, Runner, Settings, build_server, local_owner


def settings(database_url: str, cache_dir: Path) -> Settings:
    return Settings(
        backend="postgres", database_url=database_url, supabase_url=None, supabase_key=None, cache_dir=cache_dir
    )


@pytest.fixture
async def runner(database_url: str, tmp_path: Path) -> AsyncIterator[Runner]:
    """A runner for the local owner, its cache under the test's tmp_path."""
    r = Runner(PostgresRegistry(database_url, principal=local_owner()), settings(database_url, tmp_path / "cache"))
    yield r
    await r.aclose()


@pytest.fixture
def server(runner: Runner) -> MCPServer:
    """The server under test; each test connects in its own task (anyio's cancel scopes must
    be entered and left in one task, so the client cannot live in a fixture)."""
    return build_server(runner)
