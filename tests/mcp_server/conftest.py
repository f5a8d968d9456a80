"""Fixtures shared by the MCP server tests: one runner as the local owner, and the server over it."""

from __future__ import annotations

from collections.abc import Callable
from pathlib import Path

import pytest
from mcp.server.mcpserver import MCPServer

from runner import Runner, Settings, build_server


@pytest.fixture
async def runner(tmp_path: Path, make_settings: Callable[..., Settings], make_runner: Callable[..., Runner]) -> Runner:
    """A runner for the local owner, its cache under the test's tmp_path."""
    return make_runner(make_settings(cache_dir=tmp_path / "cache"))


@pytest.fixture
def server(runner: Runner) -> MCPServer:
    """The server under test; each test connects in its own task (anyio's cancel scopes must
    be entered and left in one task, so the client cannot live in a fixture)."""
    return build_server(runner)
