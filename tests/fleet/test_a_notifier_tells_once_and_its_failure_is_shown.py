"""An approval policy's notifier is heard from. Five identical queued calls under a policy
with a notifier once gave five notifier runs, and a notifier whose parameters did not fit
failed where nobody looked (a queued run of service_role's, status error). Now identical
pending calls are notified once, and `kiwi approvals` shows on each approval what became of
its notice: here, that the notifier failed, and why. Real `kiwi worker` and `kiwi`
processes, the real database."""

from __future__ import annotations

from collections.abc import Iterator
from pathlib import Path

import psycopg
import pytest

from tests.conftest import ROOT
from tests.fleet.workers import wait_until, workers
from tests.kiwi_cli import kiwi_env, run_kiwi

pytestmark = pytest.mark.slow  # worker processes


@pytest.fixture
def gated(conn: psycopg.Connection, publish_tool) -> Iterator[str]:
    """A tool whose calls need approval, under a policy whose notifier takes no parameters."""
    tool = publish_tool(
        "gated", {"tool_type": "script", "executor": "bash_runtime"}, {"g.sh": "echo '{}'\n"}, entrypoint="g.sh"
    )
    notifier = publish_tool(
        "strict_notifier",
        {"tool_type": "script", "executor": "bash_runtime", "parameters": []},
        {"n.sh": "echo '{}'\n"},
        entrypoint="n.sh",
    )
    conn.execute(
        "insert into approval_policies (pattern, ttl_seconds, notifier) values (%s, 600, %s)", (tool, notifier)
    )
    yield tool
    conn.execute("delete from approval_policies where pattern = %s", (tool,))
    conn.execute("delete from approvals where tool_id = %s", (tool,))


def _waiting(conn: psycopg.Connection, tool: str) -> int:
    row = conn.execute(
        "select count(*) from queued_runs where tool_id = %s and status = 'waiting_approval'", (tool,)
    ).fetchone()
    return int(row[0]) if row else 0


def test_identical_calls_notify_once_and_a_failed_notice_shows_in_kiwi_approvals(
    conn: psycopg.Connection, gated: str, database_url: str, tmp_path: Path
) -> None:
    env = kiwi_env(database_url, tmp_path)
    for _ in range(5):
        assert run_kiwi(["queue", gated, "--json"], cwd=ROOT, env=env).code == 0
    with workers(database_url, tmp_path, 1, "--poll", "0.5"):
        wait_until(lambda: _waiting(conn, gated) == 5, timeout=60, what="five runs waiting for approval")
        wait_until(
            lambda: (
                conn.execute(
                    "select count(*) from approvals where tool_id = %s and notice like 'failed:%%'", (gated,)
                ).fetchone()
                == (1,)
            ),
            timeout=60,
            what="the notifier's failure to reach the approval",
        )
    notified = conn.execute(
        "select count(*) from queued_runs r join approvals a on a.notice_run_id = r.id where a.tool_id = %s", (gated,)
    ).fetchone()
    assert notified == (1,), "five identical calls were notified once"
    shown = run_kiwi(["approvals"], cwd=ROOT, env=env)
    assert shown.code == 0, shown.err
    notices = [line.strip() for line in shown.out.splitlines() if line.strip().startswith("notice:")]
    failed = [n for n in notices if n.startswith("notice: failed: notifier ")]
    assert len(failed) == 1 and "unexpected parameter" in failed[0], shown.out
    assert sum(n.startswith("notice: not sent: the same call is waiting in approval") for n in notices) == 4, shown.out
