"""Deleting a tool while its runs are being recorded waits for the records; neither is refused
as a deadlock. Recording a run counts it for the tool's quality score: the count row, then
(when the score moves) the tool's row. Deleting the tool locks the tool's row, then deletes
its count row. Taken in those two orders the two writers deadlocked (found when `make test`
deleted a tool through MCP while the runner still wrote its last runs behind the replies);
the recording now locks the tool's row first, as the delete does."""

from __future__ import annotations

import threading
from collections.abc import Callable

import psycopg
import pytest

pytestmark = pytest.mark.db

RECORD = (
    "insert into tool_runs (tool_id, status, caller, caller_role, source) "
    "select %s, %s, 'role:service_role', 'service_role', 'registry' from generate_series(1, %s)"
)


def test_a_tool_deleted_while_its_runs_are_recorded_waits_and_neither_deadlocks(
    database_url: str, conn: psycopg.Connection, publish_tool: Callable[..., str]
) -> None:
    tool = publish_tool("deleted_while_recorded", {"tool_type": "script", "executor": "bash_runtime"}, {"a.sh": "echo"})
    conn.execute(RECORD, (tool, "success", 300))  # enough runs that one more does not move the score
    deleted: list[object] = []

    def delete() -> None:
        with psycopg.connect(database_url, autocommit=True) as other:
            try:
                other.execute("delete from tools where ref = %s", (tool,))
                deleted.append(True)
            except psycopg.Error as e:
                deleted.append(e)

    with psycopg.connect(database_url) as recorder:  # one transaction, as a batch of records is
        recorder.execute(RECORD, (tool, "success", 1))  # counted; the score does not move
        deleting = threading.Thread(target=delete)
        deleting.start()
        deleting.join(timeout=1.5)
        assert deleting.is_alive(), "the delete waits for the records being written"
        recorder.execute(RECORD, (tool, "error", 300))  # counted; the score moves: the tool is rescored
        recorder.commit()
    deleting.join(timeout=30)
    assert deleted == [True], f"the delete went through once the records were written: {deleted}"
    assert conn.execute("select count(*) from tools where ref = %s", (tool,)).fetchone() == (0,)
