"""The run queue and its workers: throughput with 1, 2 and 4 workers, and how soon an idle
worker starts a queued run, beside a direct run of the same tool, in one run.

  throughput  a tool that sleeps 100 ms, RUNS x N runs queued at once, N `kiwi worker`
              processes (one run at a time each) already up and warm: runs per second from
              the first queueing to the last run's end (the database's clock); 1, 2 and 4
              workers in turn, ROUNDS times, each figure the median of its rounds (one round
              lasts seconds: a moment's load on the machine would move a single one)
  start       one idle worker; a run queued, waited for, then the next: the median time from
              queueing to the worker starting it (queued_at -> started_at), and the median
              queued run from queueing to its end, beside the median direct run (Runner.run in
              this process) of the same tool

Targets (the issue's): 4 workers at least 3.5x one; the median queueing-to-start with an idle
worker at most 50 ms.

Run:  .venv/bin/python bench/queue_bench.py [--runs 30] [--rounds 3] [--starts 30]
"""

from __future__ import annotations

import argparse
import asyncio
import json
import os
import statistics
import subprocess
import sys
import tempfile
import time
import uuid
from pathlib import Path
from typing import Any

import psycopg
from psycopg.types.json import Jsonb

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT))
sys.path.insert(0, str(ROOT / "bench"))

from report import Verdict, git_commit, summary  # noqa: E402

from runner import LOCAL_OWNER_ID, PostgresRegistry, Runner, Settings, local_owner  # noqa: E402
from runner.config import STACK_RUNNER_LOGIN, STACK_SUPERUSER_LOGIN, stack_database_url  # noqa: E402

OWNER = {"sub": LOCAL_OWNER_ID, "role": "authenticated", "aud": "authenticated"}
SLEEP = "#!/usr/bin/env bash\nsleep 0.1\necho '{\"slept\": 100}'\n"


def publish(conn: psycopg.Connection[Any]) -> str:
    tool_id = f"bench_sleep_{uuid.uuid4().hex[:8]}"
    manifest = {
        "tool_id": tool_id,
        "version": "1.0.0",
        "tool_type": "script",
        "executor": "bash_runtime",
        "entrypoint": "sleep.sh",
        "visibility": "public",
        "config": {"timeout": 30},
    }
    files = [{"path": "sleep.sh", "content_text": SLEEP, "is_entrypoint": True}]
    conn.execute("select publish_tool_version(%s, %s)", (Jsonb(manifest), Jsonb(files)))
    return tool_id


def enqueue(conn: psycopg.Connection[Any], tool_id: str, count: int) -> list[str]:
    """Queue `count` runs as the local owner, each in its own transaction (as callers do)."""
    ids = []
    for _ in range(count):
        with conn.transaction():
            conn.execute("select set_config('request.jwt.claims', %s, true)", (json.dumps(OWNER),))
            conn.execute("set local role authenticated")
            row = conn.execute("select public.enqueue_run(%s) ->> 'id'", (Jsonb({"tool_id": tool_id}),)).fetchone()
        assert row is not None
        ids.append(str(row[0]))
    return ids


POLL_S = 0.05  # how often the bench looks: its own queries are load on the machine it measures


def wait_ended(conn: psycopg.Connection[Any], ids: list[str], timeout: float = 600) -> None:
    deadline = time.monotonic() + timeout
    while True:
        row = conn.execute(
            "select count(*) filter (where finished_at is not null), count(*) filter (where status <> 'success'"
            " and finished_at is not null) from queued_runs where id = any(%s::uuid[])",
            (ids,),
        ).fetchone()
        assert row is not None
        if row[1]:
            raise SystemExit(f"{row[1]} queued runs failed")
        if row[0] == len(ids):
            return
        if time.monotonic() > deadline:
            raise SystemExit(f"only {row[0]} of {len(ids)} queued runs ended in {timeout:.0f} s")
        time.sleep(POLL_S)


def start_workers(count: int, cache: Path) -> list[subprocess.Popen[bytes]]:
    env = {k: v for k, v in os.environ.items() if not k.startswith("KIWI_DATABASE_URL")}
    env.update(KIWI_DATABASE_URL=runner_url(), KIWI_CACHE_DIR=str(cache), PYTHONPATH=str(ROOT))
    return [
        subprocess.Popen(
            [sys.executable, "-m", "runner.cli", "worker", "--poll", "1"],
            cwd=ROOT,
            env=env,
            stdout=subprocess.DEVNULL,
            stderr=subprocess.DEVNULL,
        )
        for _ in range(count)
    ]


def stop_workers(procs: list[subprocess.Popen[bytes]]) -> None:
    for proc in procs:
        proc.terminate()
    for proc in procs:
        try:
            proc.wait(timeout=30)
        except subprocess.TimeoutExpired:
            proc.kill()


def superuser_url() -> str:
    return os.environ.get("KIWI_DATABASE_URL") or stack_database_url(login=STACK_SUPERUSER_LOGIN)


def runner_url() -> str:
    return os.environ.get("KIWI_RUNNER_DATABASE_URL") or stack_database_url(login=STACK_RUNNER_LOGIN)


def throughput(conn: psycopg.Connection[Any], tool_id: str, workers: int, runs: int, cache: Path) -> float:
    procs = start_workers(workers, cache)
    try:
        wait_ended(conn, enqueue(conn, tool_id, workers * 2))  # warm: files, plans, connections
        ids = enqueue(conn, tool_id, runs * workers)
        wait_ended(conn, ids)
    finally:
        stop_workers(procs)
    row = conn.execute(
        "select extract(epoch from max(finished_at) - min(queued_at)) from queued_runs where id = any(%s::uuid[])",
        (ids,),
    ).fetchone()
    assert row is not None
    return len(ids) / float(row[0])


def starts(conn: psycopg.Connection[Any], tool_id: str, count: int, cache: Path) -> tuple[list[float], list[float]]:
    procs = start_workers(1, cache)
    try:
        wait_ended(conn, enqueue(conn, tool_id, 3))
        time.sleep(1.5)  # idle: the worker waits on LISTEN
        to_start, to_end = [], []
        for _ in range(count):
            ids = enqueue(conn, tool_id, 1)
            wait_ended(conn, ids)
            row = conn.execute(
                "select extract(epoch from started_at - queued_at), extract(epoch from finished_at - queued_at)"
                " from queued_runs where id = %s",
                (ids[0],),
            ).fetchone()
            assert row is not None
            to_start.append(float(row[0]) * 1000)
            to_end.append(float(row[1]) * 1000)
            time.sleep(0.2)  # idle again
    finally:
        stop_workers(procs)
    return to_start, to_end


async def direct(tool_id: str, count: int, cache: Path) -> list[float]:
    url = runner_url()
    settings = Settings(
        backend="postgres", database_url=url, supabase_url=None, supabase_key=None, cache_dir=cache, record_runs=True
    )
    runner = Runner(PostgresRegistry(url, principal=local_owner()), settings)
    samples = []
    try:
        for i in range(count + 3):
            started = time.perf_counter()
            result = await runner.run(tool_id, {})
            assert result.ok, result.error
            if i >= 3:
                samples.append((time.perf_counter() - started) * 1000)
    finally:
        await runner.aclose()
    return samples


def main(runs: int, count: int, rounds: int) -> int:
    with psycopg.connect(superuser_url(), autocommit=True) as conn, tempfile.TemporaryDirectory() as tmp:
        tool_id = publish(conn)
        try:
            measured: dict[int, list[float]] = {1: [], 2: [], 4: []}
            for r in range(rounds):
                for n, seen in measured.items():
                    seen.append(throughput(conn, tool_id, n, runs, Path(tmp) / f"w{n}-{r}"))
            rates = {n: statistics.median(seen) for n, seen in measured.items()}
            to_start, to_end = starts(conn, tool_id, count, Path(tmp) / "start")
            direct_ms = asyncio.run(direct(tool_id, count, Path(tmp) / "direct"))
        finally:
            conn.execute("delete from queued_runs where tool_id = %s", (tool_id,))
            conn.execute("delete from tools where ref = %s", (tool_id,))
    lines = [
        f"# Run queue ({git_commit()}, a 100 ms tool, {runs} runs per worker,"
        f" median of {rounds} rounds, {count} starts)",
        "",
    ]
    for n, rate in rates.items():
        each = ", ".join(f"{x:.2f}" for x in measured[n])
        lines.append(f"{n} worker(s): {rate:6.2f} runs/s ({rate / rates[1]:.2f}x one; rounds: {each})")
    start_ms, end_ms, direct_med = statistics.median(to_start), statistics.median(to_end), statistics.median(direct_ms)
    lines.append(
        f"queued -> started (idle worker): median {start_ms:.1f} ms, p90 "
        f"{statistics.quantiles(to_start, n=10)[-1]:.1f} ms"
    )
    lines.append(f"queued -> ended {end_ms:.1f} ms; a direct run of the same tool {direct_med:.1f} ms")
    verdicts = [
        Verdict("throughput, 4 workers / 1 worker", rates[4] / rates[1], "x", ">=", 3.5),
        Verdict("queued -> started, idle worker (median)", start_ms, "ms", "<=", 50.0),
        Verdict("throughput, 1 worker", rates[1], "runs/s", ">=", rates[1], judged=False),
        Verdict("throughput, 2 workers", rates[2], "runs/s", ">=", rates[2], judged=False),
        Verdict("throughput, 4 workers", rates[4], "runs/s", ">=", rates[4], judged=False),
        Verdict("queued -> ended (median)", end_ms, "ms", "<=", end_ms, judged=False),
        Verdict("direct run, same tool (median)", direct_med, "ms", "<=", direct_med, judged=False),
    ]
    print("\n".join([*lines, "", *summary(verdicts)]))
    return 0 if all(v.passed for v in verdicts if v.judged) else 1


if __name__ == "__main__":
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--runs", type=int, default=30, help="runs per worker in each throughput round")
    parser.add_argument("--rounds", type=int, default=3, help="throughput rounds (each figure is their median)")
    parser.add_argument("--starts", type=int, default=30, help="queued runs timed one at a time")
    args = parser.parse_args()
    sys.exit(main(args.runs, args.starts, args.rounds))
