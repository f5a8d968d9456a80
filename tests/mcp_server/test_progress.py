"""Progress of an `execute` run over MCP (issue 17, item 3), for a client that sent a
progressToken: a runtime's environment being built, each stderr line of the tool, and an
upstream MCP server's own progress during a proxied mcp_tool call, each a progress
notification for the agent's request, counting up, all before the answer.

Real database, real processes, and the real `everything` MCP server for the upstream case.
"""

from __future__ import annotations

import itertools
import time
import uuid
from collections.abc import Callable
from pathlib import Path
from typing import Any

from mcp import Client

from runner import Runner, build_server
from tests.mcp import EVERYTHING, mcp_runner, stdio_server, unique
from tests.mcp.test_handler import Publish, mcp_tool, publish  # noqa: F401  (publish: a fixture)
from tests.mcp_server.test_server import ok


class Progress:
    """The progress notifications a call received: (progress, total, message, when)."""

    def __init__(self) -> None:
        self.seen: list[tuple[float, float | None, str | None, float]] = []

    async def __call__(self, progress: float, total: float | None, message: str | None) -> None:
        self.seen.append((progress, total, message, time.monotonic()))

    def values(self) -> list[float]:
        return [p for p, _, _, _ in self.seen]

    def messages(self) -> list[str]:
        return [m or "" for _, _, m, _ in self.seen]


def counting_up(values: list[float]) -> bool:
    return all(b > a for a, b in itertools.pairwise(values))


def built_tool(publish_tool: Callable[..., str], steps: list[dict[str, Any]]) -> str:
    """A script on a runtime of its own whose environment is built by `steps`."""
    runtime = publish_tool(
        "mcp_env_runtime",
        {
            "tool_type": "runtime",
            "executor": "subprocess",
            "config": {"command": "sh", "args": ["{entrypoint}"], "environment": {"key": ["sh"], "steps": steps}},
        },
    )
    return publish_tool(
        "mcp_env_script",
        {"tool_type": "script", "executor": runtime},
        {"run.sh": "echo 'one line' >&2\necho '{\"built\": true}'\n"},
        entrypoint="run.sh",
    )


async def test_building_an_environment_is_progress_for_the_call(
    runner: Runner, publish_tool: Callable[..., str]
) -> None:
    stamp = uuid.uuid4().hex  # a new environment, whatever the cache holds
    steps = [
        {"command": "sh", "args": ["-c", f"sleep 0.3; echo {stamp} > {{env_dir}}/first"]},
        {"command": "sh", "args": ["-c", f"echo {stamp} > {{env_dir}}/second"]},
    ]
    tool = built_tool(publish_tool, steps)
    heard = Progress()
    async with Client(build_server(runner), mode="legacy") as c:
        result = ok(await c.call_tool("execute", {"action": "run", "item_id": tool}, progress_callback=heard))
    assert result["output"] == {"built": True}
    messages = heard.messages()
    assert [m for m in messages if m.startswith("preparing environment")] == [m for m in messages[:2]], (
        messages
    )  # the steps first, in order
    assert "(1/2): sh -c" in messages[0] and "(2/2): sh -c" in messages[1]
    assert messages[2].startswith("environment ") and " ready in " in messages[2]
    assert messages[3] == "one line"  # then the tool's own stderr
    assert counting_up(heard.values()), heard.values()


async def test_each_stderr_line_is_progress_while_the_tool_runs(
    runner: Runner, publish_tool: Callable[..., str]
) -> None:
    tool = publish_tool(
        "mcp_progressing",
        {"tool_type": "script", "executor": "bash_runtime"},
        {"run.sh": 'for i in 1 2 3; do echo "step $i of 3" >&2; sleep 0.3; done\necho \'{"steps": 3}\'\n'},
        entrypoint="run.sh",
    )
    heard = Progress()
    for mode in ("legacy", "auto"):  # the 2025 handshake, then 2026-07-28
        heard.seen.clear()
        async with Client(build_server(runner), mode=mode) as c:  # type: ignore[arg-type]
            result = ok(await c.call_tool("execute", {"action": "run", "item_id": tool}, progress_callback=heard))
            answered = time.monotonic()
        assert result["output"] == {"steps": 3}
        assert heard.messages() == ["step 1 of 3", "step 2 of 3", "step 3 of 3"], mode
        assert heard.values() == [1, 2, 3]
        assert answered - heard.seen[0][3] > 0.4, "progress came only with the answer"


async def test_without_a_progress_token_a_run_sends_no_progress(
    runner: Runner, publish_tool: Callable[..., str]
) -> None:
    tool = publish_tool(
        "mcp_quiet_progress",
        {"tool_type": "script", "executor": "bash_runtime"},
        {"run.sh": "echo 'a line' >&2\necho '{}'\n"},
        entrypoint="run.sh",
    )
    seen: list[Any] = []

    async def handler(message: Any) -> None:
        seen.append(message)

    async with Client(build_server(runner), mode="legacy", message_handler=handler) as c:
        ok(await c.call_tool("execute", {"action": "run", "item_id": tool}))
    assert not [m for m in seen if type(m).__name__ == "ProgressNotification"], seen


async def test_an_upstream_server_s_progress_is_forwarded_to_the_agent(
    database_url: str,
    tmp_path: Path,
    publish: Publish,  # noqa: F811
) -> None:
    kiwi, handler = mcp_runner(database_url, tmp_path / "cache")
    try:
        server = publish(stdio_server(unique("everything"), [str(EVERYTHING), "stdio"]))
        tool = publish(mcp_tool(server, "long", config={"tool": "trigger-long-running-operation"}))
        heard = Progress()
        async with Client(build_server(kiwi, mcp_pool=handler.pool), mode="legacy") as c:
            arguments = {"action": "run", "item_id": tool, "parameters": {"duration": 1, "steps": 4}}
            result = ok(await c.call_tool("execute", arguments, progress_callback=heard))
        assert result["status"] == "success", result
        assert heard.values() == [1, 2, 3, 4], heard.seen
        assert {total for _, total, _, _ in heard.seen} == {4}
    finally:
        await kiwi.aclose()
