"""A run's record now keeps its parameters, output and stderr (tool_runs.payload). Another user
reads none of it, through the table, the views or the record RPCs; nobody writes a payload into
another's record; and the record stays append-only. Real users' claims on the real database."""

from __future__ import annotations

import json
import uuid
from collections.abc import Callable
from typing import Any

import psycopg
import pytest
from psycopg.types.json import Jsonb

from runner import Runner, from_claims

pytestmark = pytest.mark.db


def claims(user: str) -> dict[str, str]:
    return {"sub": user, "role": "authenticated", "aud": "authenticated"}


def as_user(database_url: str, user: str, sql: str, args: tuple[Any, ...] = ()) -> list[Any]:
    with psycopg.connect(database_url) as c:
        c.execute(
            "select set_config('request.jwt.claims', %s, true), set_config('role', 'authenticated', true)",
            (json.dumps(claims(user)),),
        )
        return [r[0] for r in c.execute(sql, args).fetchall()]


async def test_another_user_reads_no_part_of_a_runs_payload(
    database_url: str, make_runner: Callable[..., Runner]
) -> None:
    alice, bob = str(uuid.uuid4()), str(uuid.uuid4())
    runner = make_runner(principal=from_claims(claims(alice)))
    result = await runner.run("hello_world", {"name": "alice-private-words"})
    assert result.ok, result.error
    await runner.flush_records()
    mine = as_user(database_url, alice, "select payload from tool_runs where id = %s", (result.run_id,))
    assert mine and mine[0]["params"] == {"name": "alice-private-words"}, "the caller reads their own run's payload"
    for sql in (
        "select to_jsonb(r) from tool_runs r",
        "select to_jsonb(r) from recent_runs r",
        "select to_jsonb(r) from run_summary r",
    ):
        seen = json.dumps(as_user(database_url, bob, sql))
        assert "alice-private-words" not in seen, sql
    with pytest.raises(psycopg.errors.InsufficientPrivilege):
        as_user(database_url, alice, "update tool_runs set payload = '{}' where id = %s", (result.run_id,))


def test_a_record_names_its_caller_whatever_payload_it_carries(database_url: str) -> None:
    """A payload is data: it cannot say who ran, and a record written as B is B's alone."""
    bob = str(uuid.uuid4())
    forged = {"tool_id": "hello_world", "status": "success", "payload": {"params": {}, "caller": "someone-else"}}
    [run_id] = as_user(database_url, bob, "select record_run(%s)", (Jsonb(forged),))
    [caller] = as_user(database_url, bob, "select caller from tool_runs where id = %s", (run_id,))
    assert caller == bob
    assert as_user(database_url, str(uuid.uuid4()), "select id from tool_runs where id = %s", (run_id,)) == []
