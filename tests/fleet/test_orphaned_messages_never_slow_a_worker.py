"""Messages whose runs are gone, ended or cancelled never slow a worker. worker_take archived
them without counting them as taken, so the worker waited a poll after each: 2,805 orphaned
messages drained at about two a second and held a real run back behind them. Now a take
reads on past them (and after 1,000 says to take again at once): a real worker, in this
process, takes the real run behind 2,805 orphans without waiting once."""

from __future__ import annotations

import asyncio
from collections.abc import Callable
from typing import Any

import psycopg
import pytest

from runner import PostgresRegistry, Runner, local_owner, standard_dispatcher
from runner.fleet import QueuedRuns
from runner.fleet.worker import Worker, WorkerOptions
from tests.conftest import runner_url

pytestmark = pytest.mark.slow  # a worker and a bash run

ORPHANS = 2805


async def test_a_run_behind_thousands_of_orphaned_messages_is_taken_without_a_wait(
    conn: psycopg.Connection, database_url: str, make_settings: Callable[..., Any], publish_tool, queue: QueuedRuns
) -> None:
    tool = publish_tool(
        "after_orphans", {"tool_type": "script", "executor": "bash_runtime"}, {"a.sh": "echo '{}'\n"}, entrypoint="a.sh"
    )
    conn.execute("delete from pgmq.q_kiwi_runs")  # what earlier tests left: only this test's messages below
    conn.execute(
        "select pgmq.send('kiwi_runs', jsonb_build_object('run_id', gen_random_uuid())) from generate_series(1, %s)",
        (ORPHANS,),
    )
    run_id = str((await queue.enqueue(tool))["id"])
    url = runner_url(database_url)
    settings = make_settings(database_url=url)
    registry = PostgresRegistry(url, principal=local_owner())
    runner = Runner(registry, settings, dispatcher=standard_dispatcher(), session="orphans")
    # a poll and a tick far longer than the test: one wait would show in `polls`
    worker = Worker(registry, settings, runner, WorkerOptions(max_runs=1, poll_s=60.0, tick_s=60.0))
    try:
        await asyncio.wait_for(worker.run(asyncio.Event()), timeout=120)
    finally:
        await runner.aclose()
    assert worker.polls == 0, "the worker waited before it reached the real run"
    assert (await queue.get(run_id))["status"] == "success"
    left = conn.execute("select count(*) from pgmq.q_kiwi_runs").fetchone()
    assert left == (0,), "every orphaned message was archived"
