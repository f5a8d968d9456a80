"""The queue from the command line, with real `kiwi worker` processes: queue and wait,
cancel a running run from anywhere (its processes die), retries ending dead-lettered, the
fleet listed; bad input gets one clear line."""

from __future__ import annotations

import signal
import socket
import subprocess
import time
import uuid
from pathlib import Path

import psycopg
import pytest

from tests.conftest import ROOT
from tests.fleet.workers import start_worker, wait_until, workers
from tests.kiwi_cli import kiwi_env, run_kiwi


def _status(conn: psycopg.Connection, run_id: str) -> str | None:
    row = conn.execute("select status from queued_runs where id = %s", (run_id,)).fetchone()
    return row[0] if row else None


def test_queue_and_wait_prints_the_result(database_url: str, tmp_path: Path) -> None:
    env = kiwi_env(database_url, tmp_path)
    with workers(database_url, tmp_path, 1, "--poll", "1"):
        done = run_kiwi(["queue", "hello_world", "-p", "name=Ada", "--wait"], cwd=ROOT, env=env)
        # -p is read against the tool's schema, as `kiwi run` reads it: a string that looks like a number
        numeric = run_kiwi(["queue", "hello_world", "-p", "name=42", "--wait"], cwd=ROOT, env=env)
    assert done.code == 0, done.err
    assert "Hello, Ada!" in done.out
    assert "success" in done.err
    assert numeric.code == 0, numeric.err
    assert "Hello, 42!" in numeric.out


def test_a_running_run_cancelled_from_another_process_ends_and_its_processes_die(
    conn: psycopg.Connection, publish_tool, database_url: str, tmp_path: Path
) -> None:
    marker = f"kiwi-cancel-{uuid.uuid4().hex[:8]}"
    tool = publish_tool(
        "long",
        {"tool_type": "script", "executor": "bash_runtime", "config": {"timeout": 120}},
        {"long.sh": f"#!/usr/bin/env bash\nexec -a {marker} sleep 60\n"},
        entrypoint="long.sh",
    )
    env = kiwi_env(database_url, tmp_path)
    with workers(database_url, tmp_path, 1, "--poll", "1"):
        queued = run_kiwi(["queue", tool, "--json"], cwd=ROOT, env=env).json()
        run_id = str(queued["id"])
        wait_until(lambda: _status(conn, run_id) == "running", timeout=60, what="the run to start")
        wait_until(
            lambda: subprocess.run(["pgrep", "-f", marker], capture_output=True).returncode == 0,
            timeout=30,
            what="the tool's process",
        )
        cancelled = run_kiwi(["cancel", run_id, "--json"], cwd=ROOT, env=env)
        assert cancelled.code == 0, cancelled.err
        wait_until(lambda: _status(conn, run_id) == "cancelled", timeout=30, what="the run to end cancelled")
    assert subprocess.run(["pgrep", "-f", marker], capture_output=True).returncode == 1, "its process died"
    record = conn.execute("select status, error_summary from tool_runs where id = %s", (run_id,)).fetchone()
    assert record is not None and record[0] == "error" and "cancel" in record[1]


def test_retries_follow_the_manifest_and_end_dead_lettered(
    conn: psycopg.Connection, publish_tool, database_url: str, tmp_path: Path
) -> None:
    tool = publish_tool(
        "flaky",
        {
            "tool_type": "script",
            "executor": "bash_runtime",
            "config": {"requeue": {"attempts": 3, "backoff": 0.2, "on": ["error"]}},
        },
        {"f.sh": "#!/usr/bin/env bash\necho 'not today' >&2\nexit 3\n"},
        entrypoint="f.sh",
    )
    env = kiwi_env(database_url, tmp_path)
    with workers(database_url, tmp_path, 1, "--poll", "1"):
        done = run_kiwi(["queue", tool, "--wait", "--json"], cwd=ROOT, env=env, timeout=120)
    answer = done.json()
    assert done.code == 1
    assert (answer["status"], answer["attempt"]) == ("dead", 3)
    assert answer["error"].startswith("dead-lettered after 3 attempts")
    assert done.err.count("retrying after attempt") == 2
    records = conn.execute("select status from tool_runs where id = %s", (answer["id"],)).fetchall()
    assert records == [("error",)], "one record for the run, whatever its attempts"


def test_runs_queued_and_workers_show_the_fleet(database_url: str, tmp_path: Path) -> None:
    env = kiwi_env(database_url, tmp_path)
    queued = run_kiwi(["queue", "hello_world", "--json"], cwd=ROOT, env=env).json()
    listed = run_kiwi(["runs", "--queued", "--status", "queued", "--json"], cwd=ROOT, env=env)
    assert queued["id"] in [r["id"] for r in listed.json()]
    cancelled = run_kiwi(["cancel", str(queued["id"]), "--json"], cwd=ROOT, env=env)  # before any worker takes it
    assert (cancelled.code, cancelled.json()["status"]) == (0, "cancelled"), cancelled
    with workers(database_url, tmp_path, 1, "--poll", "1"):
        wait_until(
            lambda: any(
                w["state"] == "alive" for w in run_kiwi(["--admin", "workers", "--json"], cwd=ROOT, env=env).json()
            ),
            timeout=30,
            what="a live worker",
        )
        assert run_kiwi(["workers", "--json"], cwd=ROOT, env=env).json() == [], "only admins see the fleet"


def test_bad_input_gets_one_clear_line(database_url: str, tmp_path: Path) -> None:
    env = kiwi_env(database_url, tmp_path)
    for args, code, says in (
        (["queue", "no_such_tool_anywhere"], 3, "not found"),
        (["run-status", "not-a-uuid"], 2, "not a run id"),
        (["cancel", str(uuid.uuid4())], 3, "not found"),
        (["queue", "hello_world", "--params", "[1]"], 2, "JSON object"),
        (["queue", "hello_world", "-p", "nope=1"], 2, "unexpected parameter nope"),  # refused before queueing
        (["schedule", "add", "bad-params", "hello_world", "--cron", "0 3 * * *", "-p", "nope=1"], 2, "unexpected"),
        (["worker", "--concurrency", "0"], 2, "must be from 1"),
        # a blank name once printed the raw 'violates check constraint "schedules_name_format"'
        (["schedule", "add", "", "hello_world", "--cron", "* * * * *"], 2, "name must be 1 to 100 characters"),
        (["schedule", "add", "   ", "hello_world", "--cron", "* * * * *"], 2, "not blank"),
    ):
        done = run_kiwi(args, cwd=ROOT, env=env)
        assert done.code == code, (args, done.err)
        assert says in done.err and "Traceback" not in done.err and "constraint" not in done.err, done.err


def test_a_stopped_worker_finishes_its_run_and_a_second_signal_hands_it_back(
    conn: psycopg.Connection, publish_tool, database_url: str, tmp_path: Path
) -> None:
    tool = publish_tool(
        "two_seconds",
        {"tool_type": "script", "executor": "bash_runtime", "config": {"timeout": 3}},
        {"s.sh": "#!/usr/bin/env bash\nsleep 2\necho done\n"},
        entrypoint="s.sh",
    )
    env = kiwi_env(database_url, tmp_path)
    # one SIGTERM: no new runs, the held one finishes
    first = run_kiwi(["queue", tool, "--json"], cwd=ROOT, env=env).json()["id"]
    worker = start_worker(database_url, tmp_path, "--poll", "1", "--lease", "1")
    wait_until(lambda: _status(conn, first) == "running", timeout=60, what="the run to start")
    worker.send_signal(signal.SIGTERM)
    assert worker.wait(timeout=30) == 0
    assert _status(conn, first) == "success"
    # two: the held run is stopped, and comes back to the queue for another worker
    second = run_kiwi(["queue", tool, "--json"], cwd=ROOT, env=env).json()["id"]
    worker = start_worker(database_url, tmp_path, "--poll", "1", "--lease", "1")
    wait_until(lambda: _status(conn, second) == "running", timeout=60, what="the run to start")
    worker.send_signal(signal.SIGTERM)
    time.sleep(0.3)  # two signals at once are one (signals do not queue)
    worker.send_signal(signal.SIGTERM)
    assert worker.wait(timeout=30) == 0
    assert _status(conn, second) == "running", "abandoned, not finished"
    with workers(database_url, tmp_path, 1, "--poll", "1"):
        wait_until(lambda: _status(conn, second) == "success", timeout=60, what="another worker to run it")
    attempts = conn.execute("select attempt from queued_runs where id = %s", (second,)).fetchone()
    assert attempts == (2,)
    assert conn.execute("select count(*) from tool_runs where id = %s", (second,)).fetchone() == (1,)


@pytest.mark.slow
def test_a_worker_outlives_its_database_being_away(tmp_path: Path) -> None:
    """No database to reach: the worker says so and keeps trying, and stops when told."""
    with socket.socket() as probe:  # a port nobody listens on
        probe.bind(("127.0.0.1", 0))
        port = probe.getsockname()[1]
    log = tmp_path / "worker.log"
    worker = start_worker(
        f"postgresql://kiwi_runner:kiwi_runner@127.0.0.1:{port}/postgres", tmp_path, "--poll", "0.5", log=log
    )
    try:
        wait_until(lambda: "cannot take queued runs" in log.read_text(), timeout=60, what="the worker's warning")
        assert worker.poll() is None, "still running"
    finally:
        worker.send_signal(signal.SIGTERM)
    assert worker.wait(timeout=30) == 0
    assert "Traceback" not in log.read_text()
