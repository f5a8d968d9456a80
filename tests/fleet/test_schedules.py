"""A schedule every two seconds with three workers up: each tick runs once (three ticks,
three runs, not nine), as the schedule's owner; `kiwi schedule` adds, lists, pauses and
removes schedules."""

from __future__ import annotations

import itertools
from pathlib import Path

import psycopg

from runner import LOCAL_OWNER_ID
from tests.conftest import ROOT
from tests.fleet.workers import wait_until, workers
from tests.kiwi_cli import kiwi_env, run_kiwi


def _runs(conn: psycopg.Connection, schedule_id: str) -> list[tuple[object, str, str]]:
    return conn.execute(
        "select scheduled_for, status, caller from queued_runs where schedule_id = %s order by scheduled_for",
        (schedule_id,),
    ).fetchall()


def test_each_tick_runs_once_however_many_workers_are_up(
    conn: psycopg.Connection, publish_tool, database_url: str, tmp_path: Path
) -> None:
    tool = publish_tool(
        "ticker", {"tool_type": "script", "executor": "bash_runtime"}, {"t.sh": "echo tick\n"}, entrypoint="t.sh"
    )
    env = kiwi_env(database_url, tmp_path)
    added = run_kiwi(["schedule", "add", f"every2s-{tool}", tool, "--cron", "2 seconds", "--json"], cwd=ROOT, env=env)
    assert added.code == 0, added.err
    schedule = added.json()
    try:
        with workers(database_url, tmp_path, 3, "--poll", "1"):
            wait_until(lambda: len(_runs(conn, schedule["id"])) >= 3, timeout=60, what="three ticks")
            paused = run_kiwi(["schedule", "pause", schedule["name"], "--json"], cwd=ROOT, env=env)
            assert paused.code == 0 and paused.json()["enabled"] is False, paused.err
            wait_until(
                lambda: all(status == "success" for _, status, _ in _runs(conn, schedule["id"])),
                timeout=60,
                what="the ticks' runs to end",
            )
        runs = _runs(conn, schedule["id"])
        ticks = [at for at, _, _ in runs]
        assert len(ticks) == len(set(ticks)) >= 3, "one run a tick, never two"
        gaps = [(b - a).total_seconds() for a, b in itertools.pairwise(ticks)]  # type: ignore[operator]
        # ticks stand on the 2 s grid, one run each (a tick nobody was up for is not made up)
        assert all(gap >= 2 and gap % 2 == 0 for gap in gaps), gaps
        assert {caller for _, _, caller in runs} == {LOCAL_OWNER_ID}, "a schedule's runs act as its owner"
    finally:
        run_kiwi(["schedule", "rm", schedule["name"]], cwd=ROOT, env=env)


def test_kiwi_schedule_lists_pauses_resumes_and_removes(database_url: str, tmp_path: Path) -> None:
    env = kiwi_env(database_url, tmp_path)
    name = f"nightly-{tmp_path.name}"
    added = run_kiwi(
        ["schedule", "add", name, "hello_world", "--cron", "0 3 * * *", "--tz", "Europe/Paris", "-p", "name=Ada"],
        cwd=ROOT,
        env=env,
    )
    assert added.code == 0, added.err
    listed = run_kiwi(["schedule", "list", "--json"], cwd=ROOT, env=env)
    mine = [s for s in listed.json() if s["name"] == name]
    assert len(mine) == 1 and mine[0]["params"] == {"name": "Ada"} and mine[0]["time_zone"] == "Europe/Paris"
    assert str(mine[0]["next_run_at"]).endswith(("02:00:00+00:00", "01:00:00+00:00")), "03:00 in Paris"
    assert run_kiwi(["schedule", "pause", name, "--json"], cwd=ROOT, env=env).json()["enabled"] is False
    assert run_kiwi(["schedule", "resume", name, "--json"], cwd=ROOT, env=env).json()["enabled"] is True
    bad = run_kiwi(["schedule", "add", "bad", "hello_world", "--cron", "61 * * * *"], cwd=ROOT, env=env)
    assert bad.code != 0 and "minute" in bad.err and "Traceback" not in bad.err
    assert run_kiwi(["schedule", "rm", name], cwd=ROOT, env=env).code == 0
    gone = run_kiwi(["schedule", "rm", name], cwd=ROOT, env=env)
    assert gone.code == 3 and "not found" in gone.err
