"""A call that fails before the gate for want of the database still leaves an audit row
(issue 26: "11 calls made while the database restarted failed before the gate and were never
audited").

A run whose plan could not be read (the registry unreachable) was left out of the audit on
purpose: its row could not be written then. Now it is audited like any other call refused
before the gate (decision refused, the reason saying the registry was unreachable): the row
goes to the run journal at once, HMAC-signed, and is written once the database answers
again, by the same process, or by the next one when this one stopped first. Exactly once.

Real parts: a throwaway PostgreSQL cluster migrated like the stack's (the restart tests'),
stopped and started for real; Kiwi's MCP server through the SDK's client.
"""

from __future__ import annotations

import uuid
from pathlib import Path
from typing import Any

import pytest
from mcp import Client

from runner import PostgresRegistry, Runner, build_server, local_owner
from tests.conftest import local_settings
from tests.security.test_database_restart import Cluster, cluster, own_cluster

pytestmark = pytest.mark.slow  # a PostgreSQL cluster of its own, stopped and started

__all__ = ["cluster", "own_cluster"]  # the restart tests' fixtures, used here

RUN = {"action": "run", "item_id": "hello_world", "parameters": {"name": "Ada"}}


def audit_rows(cluster: Cluster, session: str) -> list[tuple[Any, ...]]:
    return cluster.sql(
        "select tool_id, action, decision, reason, outcome from audit_log where session_id = %s", (session,)
    )


async def call_while_down(cluster: Cluster, runner: Runner, session: str, call: dict[str, Any] = RUN) -> str:
    """An `execute` call with the database stopped (a run fails before the gate). Its error text."""
    async with Client(build_server(runner, session_id=session)) as client:
        cluster.stop()
        result = await client.call_tool("execute", call)
    assert result.is_error
    return "\n".join(getattr(block, "text", "") for block in result.content)


async def test_the_row_is_written_once_the_database_answers_again(cluster: Cluster, tmp_path: Path) -> None:
    session = f"audit-restart-{uuid.uuid4()}"
    runner = Runner(
        PostgresRegistry(cluster.url, principal=local_owner()), local_settings(cluster.url, tmp_path / "cache")
    )
    try:
        text = await call_while_down(cluster, runner, session)
        assert "cannot connect" in text or "unreachable" in text, text
        cluster.start()
        await runner.flush_records()
        rows = audit_rows(cluster, session)
        assert len(rows) == 1, rows
        tool_id, action, decision, reason, outcome = rows[0]
        assert (tool_id, action, decision, outcome) == ("hello_world", "run", "refused", None)
        assert "connect" in reason and "postgres:postgres@" not in reason, reason  # why, no password
        assert runner.recorder.lost == 0
    finally:
        await runner.aclose()


async def test_a_process_that_stops_first_leaves_the_row_to_the_next(cluster: Cluster, tmp_path: Path) -> None:
    session = f"audit-restart-{uuid.uuid4()}"
    cache = tmp_path / "cache"
    runner = Runner(PostgresRegistry(cluster.url, principal=local_owner()), local_settings(cluster.url, cache))
    try:
        await call_while_down(cluster, runner, session)
    finally:
        await runner.aclose()  # the database still down: the row stays in the journal
    journal = list((cache / "journal").rglob("*.jsonl"))
    assert journal and any(session.encode() in p.read_bytes() for p in journal), "journaled, on disk"
    cluster.start()
    assert audit_rows(cluster, session) == []
    for _ in range(2):  # the next process replays it; the one after finds nothing left to write
        again = Runner(PostgresRegistry(cluster.url, principal=local_owner()), local_settings(cluster.url, cache))
        try:
            await again.flush_records()
        finally:
            await again.aclose()
    rows = audit_rows(cluster, session)
    assert len(rows) == 1 and rows[0][2] == "refused", rows


async def test_another_execute_action_is_audited_the_same_way(cluster: Cluster, tmp_path: Path) -> None:
    """Not only runs: `execute delete` (or publish, import ...) that found no database is on
    record too, written once it answers again."""
    session = f"audit-restart-{uuid.uuid4()}"
    runner = Runner(
        PostgresRegistry(cluster.url, principal=local_owner()), local_settings(cluster.url, tmp_path / "cache")
    )
    try:
        await call_while_down(cluster, runner, session, {"action": "delete", "item_id": "hello_world"})
        cluster.start()
        await runner.flush_records()
        rows = audit_rows(cluster, session)
        assert [(r[0], r[1]) for r in rows] == [("hello_world", "delete")], rows
        assert "connect" in rows[0][3]
    finally:
        await runner.aclose()
