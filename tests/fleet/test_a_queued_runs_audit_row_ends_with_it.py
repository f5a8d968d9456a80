"""A queued run's audit row is written with its end, in worker_finish's transaction, as the
caller who queued it: once, with the run's outcome and id, and no separate write behind it.
A run whose attempt went stale (another attempt holds it) still has its audit row: it ran."""

from __future__ import annotations

import asyncio
from collections.abc import Callable
from typing import Any

import psycopg
import pytest

from runner import LOCAL_OWNER_ID, PostgresRegistry, Runner, local_owner, standard_dispatcher
from runner.fleet import QueuedRuns
from runner.fleet.worker import Worker, WorkerOptions
from tests.conftest import runner_url

pytestmark = pytest.mark.slow  # a worker and bash runs


def _worker(database_url: str, make_settings: Callable[..., Any], session: str) -> tuple[Worker, Runner]:
    url = runner_url(database_url)
    settings = make_settings(database_url=url)
    registry = PostgresRegistry(url, principal=local_owner())
    runner = Runner(registry, settings, dispatcher=standard_dispatcher(), session=session)
    return Worker(registry, settings, runner, WorkerOptions(max_runs=1, poll_s=0.2, tick_s=60.0)), runner


async def _queued(
    conn: psycopg.Connection, publish_tool: Callable[..., str], queue: QueuedRuns, stem: str, script: str
) -> str:
    """A bash tool running `script`, published, and a run of it queued alone: its id."""
    tool = publish_tool(stem, {"tool_type": "script", "executor": "bash_runtime"}, {"a.sh": script}, entrypoint="a.sh")
    conn.execute("delete from pgmq.q_kiwi_runs")  # what earlier tests left: the worker takes this one
    return str((await queue.enqueue(tool))["id"])


def _audits(conn: psycopg.Connection, run_id: str) -> list[tuple[Any, ...]]:
    return conn.execute(
        "select caller, decision, outcome, session_id from audit_log where run_id = %s", (run_id,)
    ).fetchall()


async def test_a_queued_run_is_audited_once_with_its_end_as_its_caller(
    conn: psycopg.Connection, database_url: str, make_settings: Callable[..., Any], publish_tool, queue: QueuedRuns
) -> None:
    run_id = await _queued(conn, publish_tool, queue, "audited_in_queue", "echo '{}'\n")
    worker, runner = _worker(database_url, make_settings, "audit-once")
    writes: list[Any] = []
    original = runner.registry.record_audits

    async def counted(entries: list[dict[str, Any]]) -> list[str]:
        writes.append(entries)
        return await original(entries)

    runner.registry.record_audits = counted  # type: ignore[method-assign]
    try:
        await asyncio.wait_for(worker.run(asyncio.Event()), timeout=120)
        assert (await queue.get(run_id))["status"] == "success"
        # written by worker_finish: there when the run is, before the runner's recorder flushes
        assert _audits(conn, run_id) == [(LOCAL_OWNER_ID, "allowed", "success", f"queue-{run_id}")]
    finally:
        await runner.aclose()
    assert writes == [], "the run's audit row went with its end, not in a write of its own"
    assert len(_audits(conn, run_id)) == 1


async def test_an_attempt_found_stale_still_leaves_its_audit_row(
    conn: psycopg.Connection, database_url: str, make_settings: Callable[..., Any], publish_tool, queue: QueuedRuns
) -> None:
    run_id = await _queued(conn, publish_tool, queue, "audited_when_stale", "sleep 1\necho '{}'\n")
    worker, runner = _worker(database_url, make_settings, "audit-stale")
    try:
        task = asyncio.create_task(worker.run(asyncio.Event()))
        for _ in range(200):  # taken: attempt 1 runs
            if (await queue.get(run_id))["status"] == "running":
                break
            await asyncio.sleep(0.05)
        # another attempt holds it now (its lease lapsed and another worker took it)
        conn.execute("update queued_runs set attempt = attempt + 1 where id = %s", (run_id,))
        await asyncio.wait_for(task, timeout=120)
        await runner.recorder.flush()
    finally:
        await runner.aclose()
    assert conn.execute("select count(*) from tool_runs where id = %s", (run_id,)).fetchone() == (0,)
    assert _audits(conn, run_id) == [(LOCAL_OWNER_ID, "allowed", "success", f"queue-{run_id}")]
