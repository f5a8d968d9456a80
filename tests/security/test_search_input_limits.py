"""Finding (issue 16 review): search cost grew with the query without bound. Each distinct
word of a query costs index probes (its typo check, the tiers' counts), so a query of 300
random words took half a second of database time at 100k tools, and anyone, anon
included, could send one. A query vector holding NaN reached pgvector's own error.

search_tools now refuses a query of more than 64 different words or 2000 characters,
and a vector of anything but finite numbers, each with a clear error that the CLI and
the MCP server pass on as a usage error, never a traceback.
"""

from __future__ import annotations

from pathlib import Path

import psycopg
import pytest
from mcp import Client

from runner import PostgresRegistry, Runner, anon, build_server
from tests.conftest import local_settings
from tests.kiwi_cli import kiwi_env, run_kiwi

LONG = " ".join(f"word{i}" for i in range(300))


def test_anon_cannot_send_search_a_document(conn: psycopg.Connection) -> None:
    with conn.transaction(force_rollback=True):
        conn.execute("set local role anon")
        with pytest.raises(psycopg.errors.InvalidParameterValue, match="at most 64 different words"):
            conn.execute("select * from public.search_tools(%s)", (LONG,))


def test_a_megabyte_query_is_refused_before_any_work_on_it(conn: psycopg.Connection) -> None:
    with conn.transaction(force_rollback=True):
        conn.execute("set local role anon")
        with pytest.raises(psycopg.errors.InvalidParameterValue, match="this one: 1000000 characters"):
            conn.execute("select * from public.search_tools(%s)", ("word " * 200_000,))


def test_a_query_vector_must_be_finite(conn: psycopg.Connection) -> None:
    nan = [float("nan")] * 256
    with conn.transaction(force_rollback=True), pytest.raises(psycopg.errors.InvalidParameterValue, match="finite"):
        conn.execute("select * from public.search_tools('hello', null, null, 5, %s::real[], 'm')", (nan,))


def test_the_cli_refuses_it_as_a_usage_error(database_url: str, tmp_path: Path) -> None:
    done = run_kiwi(["search", LONG], cwd=tmp_path, env=kiwi_env(database_url, tmp_path / "cache"))
    assert done.code == 2 and "at most 64 different words" in done.err and "Traceback" not in done.err


async def test_the_mcp_server_answers_a_tool_error(database_url: str, tmp_path: Path) -> None:
    settings = local_settings(database_url, tmp_path)
    runner = Runner(PostgresRegistry(database_url, principal=anon()), settings)
    try:
        async with Client(build_server(runner, embedder=None)) as client:
            result = await client.call_tool("search", {"query": LONG})
    finally:
        await runner.aclose()
    assert result.is_error and "at most 64 different words" in result.content[0].text
