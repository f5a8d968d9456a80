"""A shared rate limit is not drained by asking.

Found by an attacker's trial: any signed-in user took calls from a tool's shared rate-limit
bucket through `public.check_call` with `dry_run: true`, running nothing, and the tool's
owner was then locked out for an hour. Limits count only calls that run: a dry run, through
the RPC as PostgREST would send it or through the Runner, takes nothing. Real parts: the real
database, a real rate limit row, the Runner acting as two different signed-in users.
"""

from __future__ import annotations

import json
import uuid
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import Any

import psycopg
import pytest
from psycopg.types.json import Jsonb

from runner import PostgresRegistry, Runner, from_claims
from tests.conftest import local_settings

LIMIT = 3


@pytest.fixture
def limited_tool(publish_tool: Callable[..., str], conn: psycopg.Connection) -> Iterator[str]:
    """A public tool everyone may read, with a shared limit of LIMIT calls an hour."""
    tool = publish_tool(
        "drained",
        {"tool_type": "script", "executor": "bash_runtime", "parameters": [{"name": "n", "type": "integer"}]},
        {"run.sh": "echo '{\"ok\": true}'\n"},
        entrypoint="run.sh",
    )
    row = conn.execute(
        "insert into rate_limits (scope, key, max_calls, per_seconds) values ('tool', %s, %s, 3600) returning id",
        (tool, LIMIT),
    ).fetchone()
    yield tool
    conn.execute("delete from rate_limits where id = %s", row)
    conn.execute("delete from audit_log where tool_id = %s", (tool,))


def user() -> dict[str, Any]:
    return {"sub": str(uuid.uuid4()), "role": "authenticated", "aud": "authenticated"}


def taken(conn: psycopg.Connection, tool: str) -> int:
    row = conn.execute(
        "select coalesce(sum(c.calls), 0)::int from kiwi_internal.rate_limit_counters c"
        " join rate_limits l on l.id = c.limit_id where l.key = %s",
        (tool,),
    ).fetchone()
    return int(row[0]) if row else 0


def ask_as(database_url: str, claims: dict[str, Any], call: dict[str, Any]) -> dict[str, Any]:
    """public.check_call as PostgREST calls it for a signed-in user: their role and claims."""
    with psycopg.connect(database_url) as c:
        c.execute(
            "select set_config('request.jwt.claims', %s, true), set_config('role', 'authenticated', true)",
            (json.dumps(claims),),
        )
        row = c.execute("select public.check_call(%s)", (Jsonb(call),)).fetchone()
        assert row is not None
        return dict(row[0])


def runner_as(database_url: str, claims: dict[str, Any], cache: Path) -> Runner:
    settings = local_settings(database_url, cache)
    return Runner(PostgresRegistry(database_url, principal=from_claims(claims)), settings)


async def test_dry_runs_by_a_stranger_leave_the_owner_the_whole_limit(
    database_url: str, conn: psycopg.Connection, limited_tool: str, tmp_path: Path
) -> None:
    stranger, owner = user(), user()
    call = {"tool_id": limited_tool, "params_sha256": "a" * 64, "dry_run": True}
    answers = [ask_as(database_url, stranger, call) for _ in range(LIMIT * 4)]
    assert all(a["allowed"] for a in answers), answers[-1]
    assert taken(conn, limited_tool) == 0, "a dry run through check_call took from the shared bucket"

    runner = runner_as(database_url, stranger, tmp_path / "stranger")
    try:
        for n in range(LIMIT * 2):
            dry = await runner.run(limited_tool, {"n": n}, dry_run=True)
            assert dry.ok, dry.failure
    finally:
        await runner.aclose()
    assert taken(conn, limited_tool) == 0, "a dry run through the Runner took from the shared bucket"

    runner = runner_as(database_url, owner, tmp_path / "owner")
    try:
        results = [await runner.run(limited_tool, {"n": n}) for n in range(LIMIT + 1)]
    finally:
        await runner.aclose()
    assert [r.ok for r in results] == [True] * LIMIT + [False], [r.failure for r in results]
    assert taken(conn, limited_tool) == LIMIT, "only the calls that ran are counted"


def test_a_dry_run_over_a_full_limit_is_refused_as_the_run_would_be_and_takes_nothing(
    database_url: str, conn: psycopg.Connection, limited_tool: str
) -> None:
    someone = user()
    run = {"tool_id": limited_tool, "params_sha256": "b" * 64}
    assert all(ask_as(database_url, someone, run)["allowed"] for _ in range(LIMIT))
    dry = ask_as(database_url, user(), {**run, "dry_run": True})
    assert dry["allowed"] is False and dry["kind"] == "rate_limited" and float(dry["retry_after_s"]) > 0
    assert taken(conn, limited_tool) == LIMIT
