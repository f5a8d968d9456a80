"""worker_take hides a run for the lease and its tool's time limit (from the cached plan) and
says so: the worker then starts the run without a worker_extend first. A run whose tool's
limit the take could not tell is still extended at its start, to the limit and the lease."""

from __future__ import annotations

import asyncio
from collections.abc import Callable
from typing import Any

import psycopg
import pytest
from psycopg.types.json import Jsonb

from runner import PostgresRegistry, Runner, local_owner, standard_dispatcher
from runner.fleet import QueuedRuns
from runner.fleet.worker import Worker, WorkerOptions
from tests.conftest import runner_url

pytestmark = pytest.mark.slow  # a worker and bash runs


async def _one_run(
    database_url: str, make_settings: Callable[..., Any], queue: QueuedRuns, tool: str, version: str | None
) -> tuple[str, list[float]]:
    """Run one queued run of `tool` on a worker; the leases it extended to, in order."""
    run_id = str((await queue.enqueue(tool, version=version))["id"])
    url = runner_url(database_url)
    settings = make_settings(database_url=url)
    registry = PostgresRegistry(url, principal=local_owner())
    runner = Runner(registry, settings, dispatcher=standard_dispatcher(), session="lease-test")
    worker = Worker(registry, settings, runner, WorkerOptions(max_runs=1, poll_s=0.2, tick_s=60.0))
    extended: list[float] = []
    original = worker._extend

    async def counted(held: Any, lease_s: float) -> dict[str, Any] | None:
        extended.append(lease_s)
        return await original(held, lease_s)

    worker._extend = counted  # type: ignore[method-assign]
    try:
        await asyncio.wait_for(worker.run(asyncio.Event()), timeout=120)
    finally:
        await runner.aclose()
    assert (await queue.get(run_id))["status"] == "success"
    return run_id, extended


async def test_the_take_covers_the_time_limit_and_the_run_starts_without_an_extension(
    conn: psycopg.Connection, database_url: str, make_settings: Callable[..., Any], publish_tool, queue: QueuedRuns
) -> None:
    manifest = {"tool_type": "script", "executor": "bash_runtime", "config": {"timeout": 45}}
    tool = publish_tool("hid_by_take", manifest, {"a.sh": "echo '{}'\n"}, entrypoint="a.sh")
    conn.execute("delete from pgmq.q_kiwi_runs")  # what earlier tests left: the worker takes this one
    _, extended = await _one_run(database_url, make_settings, queue, tool, None)
    assert extended == [], "the take's lease covered the run: no extension before it started"


async def test_a_version_the_take_cannot_tell_is_extended_at_its_start(
    conn: psycopg.Connection, database_url: str, make_settings: Callable[..., Any], publish_tool, queue: QueuedRuns
) -> None:
    manifest = {"tool_type": "script", "executor": "bash_runtime", "config": {"timeout": 45}}
    tool = publish_tool("extended_at_start", manifest, {"a.sh": "echo '{}'\n"}, entrypoint="a.sh")
    newer = {**manifest, "tool_id": tool, "version": "2.0.0", "entrypoint": "a.sh"}
    files = [{"path": "a.sh", "content_text": "echo '{}'\n", "is_entrypoint": True}]
    conn.execute("select publish_tool_version(%s, %s)", (Jsonb(newer), Jsonb(files)))
    conn.execute("delete from pgmq.q_kiwi_runs")
    _, extended = await _one_run(database_url, make_settings, queue, tool, "1.0.0")
    assert extended == [75.0], "an older version, not in the plan cache: extended to its limit and the lease"
