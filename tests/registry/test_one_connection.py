"""PostgresRegistry with `max_size=1`: one connection, no pool (what a one-shot `kiwi` command uses).

The calls take turns on the one connection; a connection killed under it is replaced and a
read retried once, as with a pool; an unreachable database is reported at once; psycopg_pool
is never imported. Against the real database; the only connection killed is the test's own.
"""

from __future__ import annotations

import asyncio
import json
import subprocess
import sys
import uuid
from pathlib import Path

import psycopg
import pytest

from runner import PostgresRegistry, RegistryUnavailable, Runner, Settings, connect, local_owner


def _named(database_url: str) -> tuple[str, str]:
    """The URL with an application_name of its own, to find this registry's connections."""
    name = f"kiwi_one_{uuid.uuid4().hex[:10]}"
    return f"{database_url}{'&' if '?' in database_url else '?'}application_name={name}", name


def _backends(conn: psycopg.Connection, name: str) -> list[int]:
    rows = conn.execute("select pid from pg_stat_activity where application_name = %s", (name,)).fetchall()
    return [pid for (pid,) in rows]


async def test_concurrent_calls_take_turns_on_one_connection(database_url: str, conn: psycopg.Connection) -> None:
    url, name = _named(database_url)
    registry = PostgresRegistry(url, principal=local_owner(), max_size=1, cache_plans=False)
    try:
        tools = ["hello_world", "format_bytes", "http_echo"] * 10
        plans = await asyncio.gather(*(registry.execution_plan(t) for t in tools))
        assert [p["tool_id"] for p in plans] == tools
        assert len(_backends(conn, name)) == 1
    finally:
        await registry.aclose()
    assert _backends(conn, name) == []  # closed with the registry


async def test_a_commands_runs_hold_one_connection_and_no_listener(
    database_url: str, conn: psycopg.Connection, tmp_path: Path
) -> None:
    """What `kiwi run` opens (registry.connect(settings, one_shot=True)): one connection for every call, no plan
    cache's LISTEN connection (which a pooled registry opens on its second plan)."""
    url, name = _named(database_url)
    settings = Settings.load(environ={"KIWI_DATABASE_URL": url, "KIWI_CACHE_DIR": str(tmp_path / "cache")})
    runner = Runner(connect(settings, one_shot=True), settings)
    try:
        for _ in range(3):
            result = await runner.run("hello_world", {"name": "Ada"})
            assert result.ok, result.error
            await asyncio.sleep(0.05)  # time enough for a listener to connect, were one started
        assert len(_backends(conn, name)) == 1
    finally:
        await runner.aclose()


async def test_a_killed_connection_is_replaced_and_the_read_answered(
    database_url: str, conn: psycopg.Connection
) -> None:
    url, name = _named(database_url)
    registry = PostgresRegistry(url, principal=local_owner(), max_size=1, cache_plans=False)
    try:
        assert (await registry.execution_plan("hello_world"))["tool_id"] == "hello_world"
        [killed] = _backends(conn, name)
        conn.execute("select pg_terminate_backend(%s)", (killed,))
        assert (await registry.execution_plan("hello_world"))["tool_id"] == "hello_world"
        assert _backends(conn, name) not in ([], [killed])
    finally:
        await registry.aclose()


async def test_the_one_connection_reopens_after_aclose(database_url: str) -> None:
    registry = PostgresRegistry(database_url, principal=local_owner(), max_size=1)
    try:
        await registry.execution_plan("hello_world")
        await registry.aclose()
        assert (await registry.execution_plan("hello_world"))["tool_id"] == "hello_world"
    finally:
        await registry.aclose()


async def test_an_unreachable_database_is_reported_at_once() -> None:
    url = "postgresql://postgres:Wr0ng-S3cret-pw@127.0.0.1:1/postgres"
    registry = PostgresRegistry(url, principal=local_owner(), max_size=1, connect_timeout=3)
    loop = asyncio.get_running_loop()
    started = loop.time()
    with pytest.raises(RegistryUnavailable) as info:
        await registry.execution_plan("hello_world")
    assert loop.time() - started < 2
    assert "Wr0ng-S3cret-pw" not in str(info.value) and "***" in str(info.value)
    await registry.aclose()


def test_one_connection_never_imports_the_pool(database_url: str) -> None:
    code = (
        "import asyncio, json, sys\n"
        "from runner import PostgresRegistry, local_owner\n"
        "async def main():\n"
        f"    r = PostgresRegistry({database_url!r}, principal=local_owner(), max_size=1)\n"
        "    try:\n"
        "        await asyncio.gather(r.execution_plan('hello_world'), r.search('hello'))\n"
        "    finally:\n"
        "        await r.aclose()\n"
        "asyncio.run(main())\n"
        "print(json.dumps(sorted(sys.modules)))"
    )
    done = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=True)
    loaded = json.loads(done.stdout.strip().splitlines()[-1])
    assert "psycopg" in loaded
    assert [m for m in loaded if m.split(".")[0] == "psycopg_pool"] == []
