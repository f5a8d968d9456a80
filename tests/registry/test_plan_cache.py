"""Plans kept in memory only while the database's change notifications can drop them
(runner/registry/plan_cache.py, schema file 220_plan_notifications.sql)."""

from __future__ import annotations

import asyncio
import uuid
from collections.abc import AsyncIterator, Callable
from typing import Any

import psycopg
import pytest
from psycopg.types.json import Jsonb

from runner import PostgresRegistry, local_owner
from runner.registry.plan_cache import PlanCache


async def eventually(check: Callable[[], bool], seconds: float = 3.0) -> None:
    for _ in range(int(seconds / 0.02)):
        if check():
            return
        await asyncio.sleep(0.02)
    raise AssertionError("the condition did not become true in time")


def publish(conn: psycopg.Connection, tool_id: str, version: str, text: str) -> None:
    manifest = {"tool_id": tool_id, "tool_type": "knowledge", "version": version, "entrypoint": "k.md"}
    files = [{"path": "k.md", "content_text": text, "is_entrypoint": True}]
    conn.execute("select publish_tool_version(%s, %s)", (Jsonb(manifest), Jsonb(files)))


@pytest.fixture
def tool(conn: psycopg.Connection) -> Any:
    tool_id = f"plan_cache_{uuid.uuid4().hex[:8]}"
    publish(conn, tool_id, "1.0.0", "first")
    yield tool_id
    conn.execute("delete from tools where ref = %s", (tool_id,))


@pytest.fixture
async def registry(database_url: str) -> AsyncIterator[PostgresRegistry]:
    reg = PostgresRegistry(database_url, principal=local_owner())
    yield reg
    await reg.aclose()


async def test_a_single_plan_never_opens_the_listener(database_url: str, tool: str) -> None:
    """A one-shot process (kiwi run) must not pay for a second connection."""
    cache = PlanCache(database_url, 5)
    calls = 0

    async def fetch() -> dict[str, Any]:
        nonlocal calls
        calls += 1
        return {"n": calls}

    await cache.get((tool, None), fetch)
    await asyncio.sleep(0.2)
    assert not cache.live and cache._task is None
    await cache.aclose()


async def test_plans_are_served_from_memory_once_listening_and_dropped_at_a_publish(
    registry: PostgresRegistry, conn: psycopg.Connection, tool: str
) -> None:
    first = await registry.execution_plan(tool)
    await registry.execution_plan(tool)  # the second plan starts the listener
    cache = registry._plan_cache
    assert cache is not None
    await eventually(lambda: cache.live)
    kept = await registry.execution_plan(tool)
    assert await registry.execution_plan(tool) is kept, "a warm plan comes from memory"
    assert first["version"] == kept["version"] == "1.0.0"

    publish(conn, tool, "1.1.0", "second")
    await eventually(lambda: (local_owner().claims_json, tool, None) not in cache._plans)
    fresh = await registry.execution_plan(tool)
    assert fresh["version"] == "1.1.0"
    assert fresh["files"][0]["content_text"] == "second"


async def test_a_plan_fetched_while_a_change_commits_is_not_kept(database_url: str, conn: psycopg.Connection) -> None:
    cache = PlanCache(database_url, 5)
    await cache.get(("warm", None), lambda: asyncio.sleep(0, {"v": 0}))
    await cache.get(("warm", None), lambda: asyncio.sleep(0, {"v": 0}))
    await eventually(lambda: cache.live)

    async def fetch_racing_a_commit() -> dict[str, Any]:
        conn.execute("select pg_notify('kiwi_plans', '')")  # a commit lands mid-fetch
        await asyncio.sleep(0.3)  # ... and its notification arrives before the answer
        return {"v": "old"}

    await cache.get(("racy", None), fetch_racing_a_commit)
    assert ("racy", None) not in cache._plans, "a plan read across a change must not be kept"
    await cache.aclose()


async def test_losing_the_listener_turns_the_cache_off(
    registry: PostgresRegistry, conn: psycopg.Connection, tool: str
) -> None:
    await registry.execution_plan(tool)
    await registry.execution_plan(tool)
    cache = registry._plan_cache
    assert cache is not None
    await eventually(lambda: cache.live)
    conn.execute("select pg_terminate_backend(pid) from pg_stat_activity where query = 'listen kiwi_plans'")
    await eventually(lambda: not cache.live)
    assert cache._plans == {}
    assert (await registry.execution_plan(tool))["version"] == "1.0.0", "plans still come, from the database"
