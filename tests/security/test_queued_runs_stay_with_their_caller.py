"""The run queue holds to the tenancy rules: a run is queued as the caller of the request and
nobody else, another tenant neither reads nor cancels it, nobody but the queue's own functions
reaches the parameters and claims it keeps, and a caller cannot take a schedule's tick.

Found while building it: enqueue_run took schedule_id and scheduled_for from the request, so a
user naming another's schedule and its next tick took that tick's slot (the pair is unique)
and the owner's run was never queued."""

from __future__ import annotations

import json
import uuid
from typing import Any

import psycopg
import pytest
from psycopg.types.json import Jsonb

from runner import LOCAL_OWNER_ID

ALICE = {"sub": LOCAL_OWNER_ID, "role": "authenticated", "aud": "authenticated"}
MALLORY = {"sub": str(uuid.uuid4()), "role": "authenticated", "aud": "authenticated"}


def _as(conn: psycopg.Connection, claims: dict[str, Any], sql: str, *args: Any) -> Any:
    with conn.transaction():
        conn.execute("select set_config('request.jwt.claims', %s, true)", (json.dumps(claims),))
        conn.execute(f"set local role {claims['role']}")
        row = conn.execute(sql, args).fetchone()
    return row[0] if row else None


def test_a_caller_cannot_take_a_schedules_tick(conn: psycopg.Connection) -> None:
    schedule = _as(
        conn,
        ALICE,
        "select add_schedule(%s)",
        Jsonb({"name": f"tick-{uuid.uuid4().hex[:6]}", "cron": "0 3 * * *", "tool_id": "hello_world"}),
    )
    try:
        forged = _as(
            conn,
            MALLORY,
            "select enqueue_run(%s)",
            Jsonb({"tool_id": "hello_world", "schedule_id": schedule["id"], "scheduled_for": schedule["next_run_at"]}),
        )
        assert forged["schedule_id"] is None and forged["scheduled_for"] is None
        conn.execute("update schedules set next_run_at = now() - interval '1 second' where id = %s", (schedule["id"],))
        due = conn.execute("select next_run_at from schedules where id = %s", (schedule["id"],)).fetchone()
        conn.execute("select public.queue_tick()")
        ticked = conn.execute(
            "select caller from queued_runs where schedule_id = %s and scheduled_for = %s", (schedule["id"], due[0])
        ).fetchall()
        assert ticked == [(LOCAL_OWNER_ID,)], "the owner's tick was queued, as the owner"
    finally:
        conn.execute(
            "delete from queued_runs where schedule_id = %s or tool_id = 'hello_world' and caller = %s",
            (schedule["id"], MALLORY["sub"]),
        )
        conn.execute("delete from schedules where id = %s", (schedule["id"],))


def test_another_tenant_neither_reads_nor_cancels_a_queued_run(conn: psycopg.Connection) -> None:
    run = _as(conn, ALICE, "select enqueue_run(%s)", Jsonb({"tool_id": "hello_world", "params": {"name": "secret"}}))
    try:
        assert _as(conn, MALLORY, "select queued_run(%s)", run["id"]) is None
        assert _as(conn, MALLORY, "select count(*) from queued_runs where id = %s", run["id"]) == 0
        assert _as(conn, MALLORY, "select count(*) from queued_run_events where run_id = %s", run["id"]) == 0
        with pytest.raises(psycopg.Error, match="not found"):
            _as(conn, MALLORY, "select cancel_queued_run(%s)", run["id"])
        assert _as(conn, ALICE, "select queued_run(%s) ->> 'status'", run["id"]) == "queued"
    finally:
        conn.execute("delete from queued_runs where id = %s", (run["id"],))


@pytest.mark.parametrize(
    "sql",
    [
        'select kiwi_internal.enqueue_run(\'{"tool_id": "hello_world"}\', \'{"role": "service_role"}\')',
        "select * from kiwi_internal.queued_run_inputs",
        "select * from kiwi_internal.schedule_claims",
        "select public.worker_take(gen_random_uuid(), 10, 30)",
        "select public.queue_tick()",
        "select * from pgmq.q_kiwi_runs",
    ],
)
def test_nobody_but_the_queue_reaches_its_inputs_claims_or_messages(conn: psycopg.Connection, sql: str) -> None:
    """A user may not queue with claims of their choosing, read what runs are given, or work the queue."""
    with pytest.raises(psycopg.errors.InsufficientPrivilege):
        _as(conn, MALLORY, sql)
