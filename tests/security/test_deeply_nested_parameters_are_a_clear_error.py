"""Finding: `kiwi run --params` nested 3,000 deep printed a RecursionError traceback (json.loads
recurses). Parameters may now nest at most MAX_PARAM_DEPTH (64) levels, checked without
recursion at every entry point: the CLI before parsing, and validate_params (CLI, MCP execute,
HTTP) before the schema; each says the limit.
"""

from __future__ import annotations

from collections.abc import Callable
from pathlib import Path
from typing import Any

import pytest
from mcp import Client
from mcp.server.mcpserver import MCPServer

from runner import InvalidParameters, Runner, build_server
from runner.core.params import validate_params
from tests.kiwi_cli import kiwi_env, run_kiwi


def nested(depth: int) -> Any:
    value: Any = 1
    for _ in range(depth):
        value = [value]
    return value


@pytest.fixture
def tool(publish_tool: Callable[..., str]) -> str:
    return publish_tool(
        "deep", {"tool_type": "script", "executor": "bash_runtime"}, {"run.sh": "echo ran\n"}, entrypoint="run.sh"
    )


@pytest.fixture
async def server(runner: Runner) -> MCPServer:
    return build_server(runner)


def test_kiwi_run_with_params_3000_deep_is_a_usage_error(database_url: str, tmp_path: Path, tool: str) -> None:
    env = kiwi_env(database_url, tmp_path / "cache")
    deep = '{"x": ' + "[" * 3000 + "]" * 3000 + "}"
    done = run_kiwi(["run", tool, "--params", deep], cwd=tmp_path, env=env)
    assert done.code == 2 and "--params nests deeper than 64 levels" in done.err, done.err
    assert "Traceback" not in done.err and "ran" not in done.out
    quoted = '{"x": "' + "[" * 3000 + '"}'  # brackets in a string are text, not nesting
    assert run_kiwi(["run", tool, "--params", quoted], cwd=tmp_path, env=env).code == 0


def test_kiwi_run_with_a_deep_p_value_names_the_parameter(database_url: str, tmp_path: Path, tool: str) -> None:
    env = kiwi_env(database_url, tmp_path / "cache")
    for depth in (100, 3000):  # -p values are read as JSON too
        done = run_kiwi(["run", tool, "-p", f"x={'[' * depth}{']' * depth}"], cwd=tmp_path, env=env)
        assert done.code == 2 and "x: parameters may nest at most 64" in done.err, done.err
        assert "Traceback" not in done.err


async def test_mcp_execute_refuses_deep_parameters_naming_the_limit(server: MCPServer, tool: str) -> None:
    async with Client(server) as client:
        result = await client.call_tool("execute", {"action": "run", "item_id": tool, "parameters": {"x": nested(200)}})
    said = "\n".join(getattr(b, "text", "") for b in result.content)
    assert result.is_error and "x: parameters may nest at most 64 levels deep" in said, said


@pytest.mark.slow
def test_the_limit_is_checked_without_recursion() -> None:
    assert validate_params("t", None, {"x": nested(63)})  # 64 levels with the object itself
    with pytest.raises(InvalidParameters, match="x: parameters may nest at most 64 levels deep"):
        validate_params("t", None, {"x": nested(100_000)})
