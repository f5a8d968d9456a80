"""A verdict that counted nothing is remembered for every session of its caller only while no
rate limit is scoped to sessions (check_call says so: per_session). A limit for one session,
added after such a verdict was remembered, still refuses that session's next call: the
limit's write notifies, the runner forgets, and the session's call is asked again. While a
session-scoped limit exists, a new session's first call always asks the database."""

from __future__ import annotations

import asyncio
import uuid
from collections.abc import AsyncIterator
from typing import Any

import psycopg
import pytest

from runner import PostgresRegistry, local_owner
from runner.core.records import params_digest

pytestmark = pytest.mark.db


@pytest.fixture
async def registry(database_url: str) -> AsyncIterator[PostgresRegistry]:
    registry = PostgresRegistry(database_url, principal=local_owner())
    yield registry
    await registry.aclose()


async def _live(registry: PostgresRegistry) -> None:
    """The registry's memory listening (it starts at the second answer it is asked for)."""
    await registry.plan("hello_world")
    await registry.plan("hello_world")
    for _ in range(500):
        if registry.backend.cache is not None and registry.backend.cache.live:
            return
        await asyncio.sleep(0.01)
    raise AssertionError("the registry's memory never went live")


def _call(session: str) -> dict[str, Any]:
    digest, size = params_digest({"name": "x"})
    return {"tool_id": "hello_world", "session_id": session, "params_sha256": digest, "params_size": size}


async def _forgotten(registry: PostgresRegistry, call: dict[str, Any]) -> None:
    for _ in range(500):  # the limit's notification reaches the runner's listener
        if registry.remembered_verdict(call) is None:
            return
        await asyncio.sleep(0.01)
    raise AssertionError("the remembered verdict outlived the new limit")


async def test_a_limit_for_one_session_refuses_it_after_another_sessions_verdict_was_remembered(
    registry: PostgresRegistry, conn: psycopg.Connection
) -> None:
    conn.execute("delete from rate_limits where scope = 'session'")  # none: verdicts hold in any session
    await _live(registry)
    first, blocked = f"s-{uuid.uuid4()}", f"s-{uuid.uuid4()}"
    verdict = await registry.check_call(_call(first))
    assert verdict["allowed"] is True and verdict["per_session"] is False
    assert registry.remembered_verdict(_call(blocked)) == verdict, "remembered for the caller's other sessions"
    limit = conn.execute(
        "insert into rate_limits (scope, key, max_calls, per_seconds) values ('session', %s, 0, 60) returning id",
        (blocked,),
    ).fetchone()
    try:
        await _forgotten(registry, _call(blocked))
        refused = await registry.check_call(_call(blocked))
        assert refused["allowed"] is False and refused["kind"] == "rate_limited"
        again = await registry.check_call(_call(f"s-{uuid.uuid4()}"))
        assert again["allowed"] is True and again["per_session"] is True
        assert registry.remembered_verdict(_call(f"s-{uuid.uuid4()}")) is None, "a new session asks again"
    finally:
        assert limit is not None
        conn.execute("delete from rate_limits where id = %s", (limit[0],))
