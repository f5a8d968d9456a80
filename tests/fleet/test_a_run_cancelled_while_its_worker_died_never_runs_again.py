"""A run cancelled while its worker lay dead is not run again by the next worker: it ends
cancelled when that worker takes its message back. (It used to start again, and was stopped
only once the new worker's lease renewal heard of the cancel.) Real `kiwi worker` processes,
one killed with SIGKILL mid-run; the real database."""

from __future__ import annotations

import asyncio
import time
from collections.abc import Callable
from pathlib import Path

from runner import PostgresRegistry, local_owner
from runner.fleet import QueuedRuns
from tests.conftest import runner_url
from tests.mcp_server.task_fleet import kiwi_worker

SLEEPER = 'echo "started" >&2\nsleep 4\necho \'{"done": true}\'\n'


async def started(queue: QueuedRuns, run_id: str) -> int:
    return sum(1 for e in (await queue.get(run_id))["events"] if e.get("message") == "started")


async def test_a_run_cancelled_while_no_worker_held_it_ends_cancelled_unrun(
    database_url: str, publish_tool: Callable[..., str], tmp_path: Path
) -> None:
    tool = publish_tool(
        "orphaned",
        # its lease is its timeout and the worker's lease: about 6 s after the worker dies, it is back
        {"tool_type": "script", "executor": "bash_runtime", "parameters": [], "config": {"timeout": 5}},
        {"run.sh": SLEEPER},
        entrypoint="run.sh",
    )
    registry = PostgresRegistry(runner_url(database_url), principal=local_owner())
    queue = QueuedRuns(registry)
    try:
        with kiwi_worker(database_url, tmp_path / "first", "--lease", "1") as first:
            run_id = str((await queue.enqueue(tool))["id"])
            deadline = time.monotonic() + 60
            while not await started(queue, run_id):
                assert time.monotonic() < deadline, "the first worker never started the run"
                await asyncio.sleep(0.05)
            first.proc.kill()  # no goodbye: the run stays `running`, its message leased
            first.proc.wait()
        await queue.cancel(run_id)  # nobody hears it
        assert (await queue.get(run_id))["status"] == "running"
        with kiwi_worker(database_url, tmp_path / "second", "--lease", "1"):
            deadline = time.monotonic() + 60
            while (run := await queue.get(run_id))["status"] == "running":
                assert time.monotonic() < deadline, "the second worker never took the run back"
                await asyncio.sleep(0.1)
        assert run["status"] == "cancelled", run
        assert "not run again" in str(run["error"])
        assert await started(queue, run_id) == 1  # it never started a second time
    finally:
        await registry.aclose()
