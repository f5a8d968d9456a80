"""`kiwi worker` processes for the fleet's tests: real processes on the suite's database,
started and killed the way an operator (or a crash) would."""

from __future__ import annotations

import json
import os
import signal
import subprocess
import sys
import time
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from pathlib import Path
from typing import Any

import psycopg
from psycopg.types.json import Jsonb

from tests.conftest import ROOT
from tests.kiwi_cli import kiwi_env


def start_worker(
    database_url: str, cache_dir: Path, *args: str, log: Path | None = None, env: dict[str, str] | None = None
) -> subprocess.Popen[bytes]:
    """A `kiwi worker` in its own process group (a SIGKILL of the group is a machine dying),
    with `env` added to its environment (OTEL_*, say)."""
    out = open(log, "ab") if log else subprocess.DEVNULL  # noqa: SIM115 - the process owns it
    return subprocess.Popen(
        [sys.executable, "-m", "runner.cli", "worker", *args],
        cwd=ROOT,
        env=kiwi_env(database_url, cache_dir, **(env or {})),
        stdout=out,
        stderr=out,
        start_new_session=True,
    )


def kill_hard(proc: subprocess.Popen[bytes]) -> None:
    """SIGKILL the worker alone: what its sandboxed children do then is the sandbox's business."""
    proc.kill()
    proc.wait(timeout=30)


def stop(proc: subprocess.Popen[bytes]) -> None:
    if proc.poll() is None:
        os.killpg(proc.pid, signal.SIGTERM)
        try:
            proc.wait(timeout=30)
        except subprocess.TimeoutExpired:
            os.killpg(proc.pid, signal.SIGKILL)
            proc.wait(timeout=30)


@contextmanager
def workers(database_url: str, cache_dir: Path, count: int, *args: str) -> Iterator[list[subprocess.Popen[bytes]]]:
    procs = [start_worker(database_url, cache_dir, *args) for _ in range(count)]
    try:
        yield procs
    finally:
        for proc in procs:
            stop(proc)


def enqueue_as(conn: psycopg.Connection, claims: dict[str, Any], request: dict[str, Any]) -> dict[str, Any]:
    """enqueue_run as the caller the claims name (role and request.jwt.claims set locally, as
    PostgREST sets them), in one transaction."""
    with conn.transaction():
        conn.execute("select set_config('request.jwt.claims', %s, true)", (json.dumps(claims),))
        conn.execute(f"set local role {claims['role']}")
        row = conn.execute("select public.enqueue_run(%s)", (Jsonb(request),)).fetchone()
    assert row is not None
    answer: dict[str, Any] = row[0]
    return answer


def wait_until(check: Callable[[], bool], *, timeout: float, what: str, every: float = 0.1) -> None:
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        if check():
            return
        time.sleep(every)
    raise AssertionError(f"timed out after {timeout:.0f} s waiting for {what}")
