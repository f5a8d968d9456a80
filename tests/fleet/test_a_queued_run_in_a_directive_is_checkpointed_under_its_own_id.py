"""A queued run of a tool that changes state, in a directive's context, is checkpointed like a
direct one, under the queued run's own id (the id its record gets, and the one `kiwi queue`
answered): `kiwi rollback` of that id restores the tree."""

from __future__ import annotations

import asyncio
import os
from collections.abc import Callable, Iterator
from pathlib import Path

import pytest

from runner import PostgresRegistry, local_owner
from runner.fleet import QueuedRuns
from tests.checkpoint_setup import AFTER, BEFORE, files_of, git_worktree, scribble_and_directive
from tests.conftest import runner_url
from tests.fleet.workers import start_worker, stop, wait_until
from tests.kiwi_cli import kiwi_env, run_kiwi

pytestmark = pytest.mark.slow
ENDED = ("success", "error", "timeout", "cancelled", "dead")


@pytest.fixture
def worktree() -> Iterator[Path]:
    with git_worktree() as tree:
        yield tree


async def test_a_queued_run_is_rolled_back_by_its_queued_id(
    database_url: str, tmp_path: Path, publish_tool: Callable[..., str], worktree: Path
) -> None:
    tool, directive = scribble_and_directive(publish_tool, worktree)
    registry = PostgresRegistry(runner_url(database_url), principal=local_owner())
    try:
        context = await registry.open_context(f"queue-test-{os.getpid()}", directive)
        queue = QueuedRuns(registry)
        queued = await queue.enqueue(tool, {"dir": str(worktree)}, context=str(context["id"]))
        worker = start_worker(database_url, tmp_path / "cache", env={"KIWI_WORKTREE": str(worktree)})
        try:
            wait_until(lambda: files_of(worktree) == AFTER, timeout=60, what="the queued run changed the tree")
            for _ in range(300):
                if (await queue.get(queued["id"], events=False))["status"] in ENDED:
                    break
                await asyncio.sleep(0.1)
            assert (await queue.get(queued["id"], events=False))["status"] == "success"
        finally:
            stop(worker)
        row = await registry.rollback_checkpoint(queued["id"])
    finally:
        await registry.aclose()
    assert row["run_id"] == queued["id"] and row["context_id"] == context["id"]
    done = run_kiwi(["rollback", queued["id"]], cwd=worktree, env=kiwi_env(database_url, tmp_path / "cache"))
    assert done.code == 0, done.err
    assert files_of(worktree) == BEFORE
