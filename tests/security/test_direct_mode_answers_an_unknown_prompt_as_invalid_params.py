"""Finding: in direct mode (`kiwi serve --directive ...`) a prompts/get for a prompt that does
not exist (direct mode has none) was answered as an internal error (JSON-RPC code 0, or -32603
in this SDK) and logged a traceback. It is now INVALID_PARAMS (-32602) naming the prompt, and
nothing is logged as an error. Over stdio, a real `kiwi serve` process.
"""

from __future__ import annotations

import sys
from collections.abc import Callable
from pathlib import Path

import pytest
from mcp import Client, StdioServerParameters
from mcp.shared.exceptions import MCPError
from mcp_types import INVALID_PARAMS

from runner.testing.http_serving import serve_env
from tests.conftest import ROOT


@pytest.fixture
def directive(publish_tool: Callable[..., str]) -> str:
    greet = publish_tool(
        "prompt_greet", {"tool_type": "script", "executor": "bash_runtime"}, {"g.sh": "echo hi\n"}, entrypoint="g.sh"
    )
    return publish_tool(
        "prompt_directive",
        {
            "tool_type": "directive",
            "executor": "directive_runtime",
            "requires": {"tools": [{"id": greet}]},
            "permissions": {"tools": [greet]},
        },
        {"directive.md": "# Greet\n\nGreet the user.\n"},
        entrypoint="directive.md",
    )


async def test_an_unknown_prompt_is_invalid_params_and_no_traceback(
    database_url: str, tmp_path: Path, directive: str, capfd: pytest.CaptureFixture[str]
) -> None:
    params = StdioServerParameters(
        command=sys.executable,
        args=["-m", "runner.cli.serve", "--transport", "stdio", "--directive", directive],
        env=serve_env(database_url, tmp_path / "cache"),
        cwd=str(ROOT),
    )
    async with Client(params) as client:
        assert (await client.list_prompts()).prompts == []
        with pytest.raises(MCPError) as raised:
            await client.get_prompt("no_such_prompt")
        assert len((await client.list_tools()).tools) == 1  # the server goes on
    assert raised.value.error.code == INVALID_PARAMS
    assert "unknown prompt 'no_such_prompt'" in raised.value.error.message
    logged = capfd.readouterr().err
    assert "Traceback" not in logged and "Unknown prompt" not in logged, logged
