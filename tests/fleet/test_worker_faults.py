"""A worker that dies loses nothing: 1,000 queued runs of a tool that sleeps 50-200 ms, four
workers, one SIGKILLed and restarted every few seconds. Every run ends with exactly one
result record: none lost, none recorded twice; and no process of a killed worker's runs
outlives it."""

from __future__ import annotations

import random
import subprocess
import time
import uuid
from pathlib import Path

import psycopg

from runner import LOCAL_OWNER_ID
from tests.fleet.workers import enqueue_as, kill_hard, start_worker, stop, wait_until

RUNS = 1000
OWNER = {"sub": LOCAL_OWNER_ID, "role": "authenticated", "aud": "authenticated"}
SLEEPY = '#!/usr/bin/env bash\nsleep "0.$(printf %03d $((RANDOM % 151 + 50)))"\necho "{\\"ok\\": true}"\n'


def _ended(conn: psycopg.Connection, ids: list[str]) -> int:
    row = conn.execute(
        "select count(*) from queued_runs where id = any(%s::uuid[]) and finished_at is not null", (ids,)
    ).fetchone()
    return int(row[0]) if row else 0


def test_a_thousand_runs_survive_workers_killed_mid_run(
    conn: psycopg.Connection, publish_tool, database_url: str, tmp_path: Path
) -> None:
    script = f"sleepy_{uuid.uuid4().hex}.sh"  # this test's processes only, whatever else runs on the machine
    tool = publish_tool(
        "sleepy",
        {"tool_type": "script", "executor": "bash_runtime", "config": {"timeout": 5}},
        {script: SLEEPY},
        entrypoint=script,
    )
    # the local owner's runs left open by other tests count too: no quota in the way of a thousand
    quota = conn.execute("select value from registry_quotas where name = 'open_runs_per_caller'").fetchone()
    conn.execute("update registry_quotas set value = value + %s where name = 'open_runs_per_caller'", (RUNS,))
    try:
        ids = [str(enqueue_as(conn, OWNER, {"tool_id": tool, "params": {}})["id"]) for _ in range(RUNS)]
    finally:
        if quota is not None:
            conn.execute("update registry_quotas set value = %s where name = 'open_runs_per_caller'", quota)
    # a short lease, so a killed worker's runs come back within seconds (its tool's 5 s limit plus 2 s)
    args = ("--concurrency", "4", "--lease", "2", "--poll", "1")
    procs = [start_worker(database_url, tmp_path, *args) for _ in range(4)]
    kills = 0
    rng = random.Random(7)
    try:
        deadline = time.monotonic() + 600
        while _ended(conn, ids) < RUNS:
            assert time.monotonic() < deadline, f"only {_ended(conn, ids)} of {RUNS} runs ended in 10 minutes"
            time.sleep(rng.uniform(2.0, 4.0))
            victim = rng.randrange(len(procs))
            if _ended(conn, ids) < RUNS - 50:  # kill while runs are still flowing
                kill_hard(procs[victim])
                kills += 1
                procs[victim] = start_worker(database_url, tmp_path, *args)
    finally:
        for proc in procs:
            stop(proc)

    statuses = dict(
        conn.execute(
            "select status, count(*) from queued_runs where id = any(%s::uuid[]) group by 1", (ids,)
        ).fetchall()
    )
    assert statuses == {"success": RUNS}
    records = conn.execute(
        "select count(*), count(distinct id) from tool_runs where id = any(%s::uuid[])", (ids,)
    ).fetchone()
    assert records == (RUNS, RUNS), "every run has exactly one run record"
    assert conn.execute("select count(*) from tool_runs where tool_id = %s", (tool,)).fetchone() == (RUNS,)
    retaken = conn.execute(
        "select count(*) from queued_runs where id = any(%s::uuid[]) and attempt > 1", (ids,)
    ).fetchone()
    assert kills >= 3 and retaken is not None and retaken[0] >= 1, "runs were taken again after their worker died"
    # what the killed workers ran ended with them (the sandbox dies with its parent)
    left = subprocess.run(["pgrep", "-f", script], capture_output=True, text=True).stdout.split()
    assert left == []


def test_a_run_whose_tool_is_gone_ends_with_the_reason(
    conn: psycopg.Connection, publish_tool, database_url: str, tmp_path: Path
) -> None:
    tool = publish_tool(
        "vanishing", {"tool_type": "script", "executor": "bash_runtime"}, {"v.sh": "echo hi\n"}, entrypoint="v.sh"
    )
    run = enqueue_as(conn, OWNER, {"tool_id": tool, "params": {}})
    conn.execute("delete from tools where ref = %s", (tool,))
    proc = start_worker(database_url, tmp_path, "--poll", "0.5")
    try:
        wait_until(lambda: _ended(conn, [str(run["id"])]) == 1, timeout=60, what="the run to end")
    finally:
        stop(proc)
    status, error = conn.execute("select status, error from queued_runs where id = %s", (run["id"],)).fetchone() or ()
    assert status == "error" and "not found" in (error or ""), error
    assert uuid.UUID(str(run["id"]))
