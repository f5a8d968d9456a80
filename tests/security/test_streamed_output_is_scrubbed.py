"""What a run streams while it runs keeps its secrets (issue 17, item 3): a tool's stderr lines,
sent to an MCP client as log and progress notifications while the tool runs, and the steps of
an environment being built, have every resolved `${VAR}` value masked, as the run's result and
record do (tests/security/test_secrets.py).

Tried as a tool that wants to leak would: the secret whole on a line, split across two writes
with a pause between (so it arrives in two pieces from the pipe), URL-encoded, inside an
environment step's command line, and a secret that itself spans two lines.

Real parts: the real database, tools published into it, real processes, the SDK's client.
"""

from __future__ import annotations

import json
import os
import uuid
from collections.abc import Callable
from urllib.parse import quote

import pytest
from mcp import Client
from mcp_types import LoggingMessageNotificationParams

from runner import Runner, build_server
from runner.core.records import MASK

SECRET = "kiwi-stream-secret-9d81c2"
TWO_LINES = "first-half-of-it-77a1\nsecond-half-of-it-03be"
LEAKER = """\
echo "whole: $TOKEN" >&2
printf 'split: %s' "${TOKEN:0:9}" >&2
sleep 0.3
printf '%s :end\\n' "${TOKEN:9}" >&2
echo "encoded: $ENCODED" >&2
echo "$PAIR" >&2
echo '{"done": true}'
"""

pytestmark = pytest.mark.filterwarnings("ignore::mcp.shared.exceptions.MCPDeprecationWarning")


@pytest.fixture
async def runner(make_runner: Callable[..., Runner]) -> Runner:
    environ = {
        **os.environ,
        "KIWI_STREAM_SECRET": SECRET,
        "KIWI_STREAM_ENCODED": quote(SECRET, safe=""),
        "KIWI_STREAM_PAIR": TWO_LINES,
    }
    return make_runner(environ=environ)


def leaking_tool(publish_tool: Callable[..., str]) -> str:
    stamp = uuid.uuid4().hex  # a new environment: its steps run, and report
    runtime = publish_tool(
        "leaky_runtime",
        {
            "tool_type": "runtime",
            "executor": "subprocess",
            "config": {
                "command": "bash",
                "args": ["{entrypoint}"],
                "environment": {
                    "key": ["bash"],
                    "steps": [{"command": "sh", "args": ["-c", f": {stamp} ${{KIWI_STREAM_SECRET}}"]}],
                },
            },
        },
    )
    return publish_tool(
        "leaky_script",
        {
            "tool_type": "script",
            "executor": runtime,
            "config": {
                "env": {
                    "TOKEN": "${KIWI_STREAM_SECRET}",
                    "ENCODED": "${KIWI_STREAM_ENCODED}",
                    "PAIR": "${KIWI_STREAM_PAIR}",
                }
            },
        },
        {"run.sh": LEAKER},
        entrypoint="run.sh",
    )


async def test_streamed_lines_and_progress_never_carry_a_secret(
    runner: Runner, publish_tool: Callable[..., str]
) -> None:
    tool = leaking_tool(publish_tool)
    logs: list[LoggingMessageNotificationParams] = []
    progress: list[str | None] = []

    async def on_log(params: LoggingMessageNotificationParams) -> None:
        logs.append(params)

    async def on_progress(value: float, total: float | None, message: str | None) -> None:
        progress.append(message)

    async with Client(build_server(runner), mode="legacy", logging_callback=on_log) as c:
        await c.set_logging_level("debug")
        result = await c.call_tool("execute", {"action": "run", "item_id": tool}, progress_callback=on_progress)
    assert not result.is_error, result.content
    lines = [str(p.data) for p in logs]
    streamed = json.dumps([lines, progress])
    for leak in (SECRET, SECRET[:9], SECRET[9:], quote(SECRET, safe=""), *TWO_LINES.splitlines()):
        assert leak not in streamed, f"{leak!r} was streamed: {streamed}"
    assert lines == [
        f"whole: {MASK}",
        f"split: {MASK} :end",  # the two writes were joined into one line before masking
        f"encoded: {MASK}",
        MASK,
        MASK,
    ]
    steps = [m for m in progress if m and m.startswith("preparing environment")]
    assert len(steps) == 1 and steps[0].endswith(f"{MASK} …"), steps  # the step's command line, masked
    assert [m for m in progress if m and not m.startswith(("preparing", "environment "))] == lines


def test_a_long_line_is_never_cut_where_a_secret_could_straddle_the_cut() -> None:
    from runner.primitives.pipes import LineSplitter

    got: list[str] = []
    splitter = LineSplitter(got.append, max_line_bytes=64)
    splitter.feed(b"x" * 60 + SECRET.encode())  # the cap falls inside the secret
    splitter.feed(b" tail\nshort\n")
    splitter.feed(b"unterminated")
    splitter.close()
    assert got == [f"[a line of {60 + len(SECRET) + 5} bytes, too long to show]", "short", "unterminated"]
    assert not any(SECRET[:5] in line for line in got)
