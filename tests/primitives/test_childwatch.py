"""A child's exit is seen through a pidfd on the running loop, not by a thread per child
(runner/primitives/childwatch.py), on whichever loop spawns it, with its exit status intact."""

from __future__ import annotations

import asyncio
import sys
import threading

import pytest

from runner.primitives import childwatch
from runner.primitives.subprocess import ProcessSpec, spawn

ENV = {"PATH": "/usr/bin:/bin"}

pytestmark = pytest.mark.skipif(not sys.platform.startswith("linux"), reason="pidfds are Linux's")


def _waiter_threads() -> list[str]:
    """asyncio's ThreadedChildWatcher names its thread for each child waitpid-N."""
    return [t.name for t in threading.enumerate() if t.name.startswith("waitpid-")]


@pytest.mark.slow
async def test_a_running_child_has_no_thread_waiting_for_it() -> None:
    run = asyncio.ensure_future(spawn(ProcessSpec(argv=["sleep", "0.3"], env=ENV, timeout_s=10)))
    await asyncio.sleep(0.15)
    assert childwatch.install(), "pidfds are available on this Linux"
    assert _waiter_threads() == []
    result = await run
    assert result.exit_code == 0 and not result.timed_out


def test_exit_statuses_come_back_on_each_new_loop() -> None:
    async def status(code: int) -> int | None:
        result = await spawn(ProcessSpec(argv=["sh", "-c", f"exit {code}"], env=ENV, timeout_s=10))
        return result.exit_code

    # each asyncio.run is a new loop, as each test and each `kiwi` command has
    assert asyncio.run(status(3)) == 3
    assert asyncio.run(status(0)) == 0

    async def killed() -> int | None:
        result = await spawn(ProcessSpec(argv=["sh", "-c", "kill -9 $$"], env=ENV, timeout_s=10))
        return result.exit_code

    assert asyncio.run(killed()) == -9


async def test_many_children_at_once_each_get_their_own_status() -> None:
    codes = list(range(20))
    results = await asyncio.gather(
        *(spawn(ProcessSpec(argv=["sh", "-c", f"exit {c}"], env=ENV, timeout_s=10)) for c in codes)
    )
    assert [r.exit_code for r in results] == codes
    assert _waiter_threads() == []
