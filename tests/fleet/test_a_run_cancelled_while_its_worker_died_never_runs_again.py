"""A run cancelled while its worker lay dead is not run again by the next worker: it ends
cancelled when that worker takes its message back. (It used to start again, and was stopped
only once the new worker's lease renewal heard of the cancel.) Real `kiwi worker` processes,
one killed with SIGKILL mid-run; the real database."""

from __future__ import annotations

import asyncio
import time
from collections.abc import Callable
from pathlib import Path

import pytest

from runner.fleet import QueuedRuns
from tests.fleet.conftest import started
from tests.fleet.workers import kill_hard
from tests.mcp_server.task_fleet import kiwi_worker

pytestmark = pytest.mark.slow  # real kiwi worker (and kiwi serve) processes


async def test_a_run_cancelled_while_no_worker_held_it_ends_cancelled_unrun(
    database_url: str, queue: QueuedRuns, sleeper: Callable[[int, int], str], tmp_path: Path
) -> None:
    tool = sleeper(4, 5)  # leased for its timeout and the worker's lease: back about 6 s after its worker dies
    with kiwi_worker(database_url, tmp_path / "first", "--lease", "1") as first:
        run_id = str((await queue.enqueue(tool))["id"])
        deadline = time.monotonic() + 60
        while not await started(queue, run_id):
            assert time.monotonic() < deadline, "the first worker never started the run"
            await asyncio.sleep(0.05)
        kill_hard(first)  # no goodbye: the run stays `running`, its message leased
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
