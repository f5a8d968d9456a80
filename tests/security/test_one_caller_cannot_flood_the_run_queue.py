"""One caller cannot flood the run queue. 3,000 `enqueue_run` calls by one fresh signed-in user
were all accepted in 3.9 s, and since workers read the oldest message first, every other
caller's run waited behind them. Now a caller keeps at most `open_runs_per_caller` runs open
(queued, running, retrying, waiting for approval; a row of registry_quotas, 1,000 by
default): the next is refused (PT422) naming the quota, and another caller still queues."""

from __future__ import annotations

import json
import uuid
from collections.abc import Iterator
from typing import Any

import psycopg
import pytest
from psycopg.types.json import Jsonb

pytestmark = pytest.mark.slow  # a thousand calls

FLOODER = {"sub": str(uuid.uuid4()), "role": "authenticated", "aud": "authenticated"}
OTHER = {"sub": str(uuid.uuid4()), "role": "authenticated", "aud": "authenticated"}


def _enqueue(conn: psycopg.Connection, claims: dict[str, Any], count: int = 1) -> None:
    with conn.transaction():
        conn.execute("select set_config('request.jwt.claims', %s, true)", (json.dumps(claims),))
        conn.execute(f"set local role {claims['role']}")
        for _ in range(count):
            conn.execute("select enqueue_run(%s)", (Jsonb({"tool_id": "hello_world", "params": {"name": "x"}}),))


@pytest.fixture
def cleanup(conn: psycopg.Connection) -> Iterator[None]:
    yield
    callers = [FLOODER["sub"], OTHER["sub"]]
    conn.execute(
        "delete from pgmq.q_kiwi_runs"
        " where message ->> 'run_id' in (select id::text from queued_runs where caller = any(%s))",
        (callers,),
    )
    conn.execute("delete from queued_runs where caller = any(%s)", (callers,))


def test_a_caller_keeps_at_most_the_quota_of_runs_open(conn: psycopg.Connection, cleanup: None) -> None:
    quota = conn.execute("select value from registry_quotas where name = 'open_runs_per_caller'").fetchone()
    assert quota == (1000,)
    _enqueue(conn, FLOODER, 1000)
    with pytest.raises(psycopg.Error) as refused:
        _enqueue(conn, FLOODER)
    assert refused.value.sqlstate == "PT422"
    assert str(refused.value.diag.message_primary).startswith(
        "quota 'open runs per caller' (1000) reached: you have 1000 runs queued, running or waiting for approval"
    )
    assert "registry_quotas.open_runs_per_caller" in str(refused.value.diag.message_primary)
    _enqueue(conn, OTHER)  # another caller is not held by the flooder's quota
    counts = dict(
        conn.execute(
            "select caller, count(*) from queued_runs where caller = any(%s) group by caller",
            ([FLOODER["sub"], OTHER["sub"]],),
        ).fetchall()
    )
    assert counts == {FLOODER["sub"]: 1000, OTHER["sub"]: 1}
