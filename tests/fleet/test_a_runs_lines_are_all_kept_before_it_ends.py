"""Every line a queued run wrote is among its events by the time it has ended, so whoever polls
it (an MCP task's tasks/result, `kiwi run-status --wait`) has heard all of it once it reads the
end. (The worker wrote the events behind the run and ended it without waiting for them: the
last lines arrived after the end, or were read by nobody.) A real `kiwi worker`, the real database."""

from __future__ import annotations

import asyncio
import time
from collections.abc import Callable
from pathlib import Path

import pytest

from runner.fleet import TERMINAL, QueuedRuns
from tests.mcp_server.task_fleet import kiwi_worker

pytestmark = pytest.mark.slow  # real kiwi worker (and kiwi serve) processes

LINES = 150  # under the 200 events a run keeps


async def test_the_last_lines_are_kept_before_the_run_ends(
    database_url: str, queue: QueuedRuns, publish_tool: Callable[..., str], tmp_path: Path
) -> None:
    tool = publish_tool(
        "chatty",
        {"tool_type": "script", "executor": "bash_runtime", "parameters": []},
        {"run.sh": f'for i in $(seq 1 {LINES}); do echo "line $i" >&2; done\necho \'{{"said": {LINES}}}\'\n'},
        entrypoint="run.sh",
    )
    with kiwi_worker(database_url, tmp_path / "worker"):
        run_id = str((await queue.enqueue(tool))["id"])
        deadline = time.monotonic() + 60
        while (run := await queue.get(run_id, events=False))["status"] not in TERMINAL:
            assert time.monotonic() < deadline, run
            await asyncio.sleep(0.02)
        said = [e["message"] for e in (await queue.get(run_id))["events"] if e["kind"] == "log"]
    assert run["status"] == "success", run
    assert said == [f"line {i}" for i in range(1, LINES + 1)]
