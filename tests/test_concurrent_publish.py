"""Publishing under contention: many connections publishing one tool at the same moment."""

from __future__ import annotations

import json
import threading
import uuid
from collections.abc import Callable, Iterator
from typing import Any

import psycopg
import pytest

WORKERS = 20


def manifest(tool_id: str, version: str, body: str = "echo") -> tuple[str, str]:
    m = {"tool_id": tool_id, "tool_type": "script", "executor": "bash_runtime", "version": version}
    return json.dumps(m), json.dumps([{"path": "main.sh", "content_text": body}])


def run_together(database_url: str, calls: list[Callable[[psycopg.Connection], Any]]) -> list[Any]:
    """Run each call on its own connection, all released at once; return results or exceptions."""
    barrier = threading.Barrier(len(calls))
    results: list[Any] = [None] * len(calls)

    def work(i: int) -> None:
        with psycopg.connect(database_url, autocommit=True) as conn:
            barrier.wait()
            try:
                results[i] = calls[i](conn)
            except psycopg.Error as exc:
                results[i] = exc

    threads = [threading.Thread(target=work, args=(i,)) for i in range(len(calls))]
    for t in threads:
        t.start()
    for t in threads:
        t.join(timeout=120)
    return results


def publish_call(tool_id: str, version: str, body: str = "echo") -> Callable[[psycopg.Connection], Any]:
    args = manifest(tool_id, version, body)
    return lambda conn: conn.execute("select publish_tool_version(%s::jsonb, %s::jsonb)", args).fetchone()[0]


@pytest.fixture
def tool_id(conn: psycopg.Connection) -> Iterator[str]:
    name = f"concurrency_{uuid.uuid4().hex[:10]}"
    yield name
    conn.execute("delete from tools where ref = %s", (name,))


@pytest.mark.parametrize("round_", range(3))
def test_twenty_concurrent_versions_leave_exactly_one_latest_and_lose_nothing(
    database_url: str, conn: psycopg.Connection, tool_id: str, round_: int
) -> None:
    """Regression: first publishes of a new tool used to deadlock on its unique index."""
    results = run_together(database_url, [publish_call(tool_id, f"1.{i}.0") for i in range(WORKERS)])
    assert [r for r in results if isinstance(r, Exception)] == []
    versions = conn.execute(
        "select v.version, v.is_latest from tool_versions v join tools t on t.id = v.tool_uuid where t.ref = %s",
        (tool_id,),
    ).fetchall()
    assert sorted(v for v, _ in versions) == sorted(f"1.{i}.0" for i in range(WORKERS))
    assert [v for v, latest in versions if latest] == [f"1.{WORKERS - 1}.0"]
    assert conn.execute("select latest_version from tools where ref = %s", (tool_id,)).fetchone()[0] == "1.19.0"


def test_twenty_identical_publishes_create_one_version(
    database_url: str, conn: psycopg.Connection, tool_id: str
) -> None:
    results = run_together(database_url, [publish_call(tool_id, "1.0.0") for _ in range(WORKERS)])
    assert [r for r in results if isinstance(r, Exception)] == []
    assert sorted(r["created"] for r in results) == [False] * (WORKERS - 1) + [True]
    assert len({r["content_hash"] for r in results}) == 1


def test_twenty_conflicting_publishes_of_one_version_keep_the_first(
    database_url: str, conn: psycopg.Connection, tool_id: str
) -> None:
    results = run_together(database_url, [publish_call(tool_id, "1.0.0", f"echo {i}") for i in range(WORKERS)])
    created = [r for r in results if isinstance(r, dict)]
    refused = [r for r in results if isinstance(r, Exception)]
    assert len(created) == 1 and len(refused) == WORKERS - 1
    assert all(e.sqlstate == "PT409" and "already published with different content" in str(e) for e in refused)
    stored = conn.execute(
        "select v.content_hash from tool_versions v join tools t on t.id = v.tool_uuid where t.ref = %s",
        (tool_id,),
    ).fetchall()
    assert stored == [(created[0]["content_hash"],)]


def test_cached_plans_stay_exact_when_a_runtime_changes_under_concurrent_publishes(
    database_url: str, conn: psycopg.Connection, tool_id: str
) -> None:
    """Plans are rebuilt at commit; overlapping rebuilds must neither fail nor leave a stale plan."""
    runtime = f"{tool_id}_rt"

    def publish_runtime(version: str, level: str) -> Callable[[psycopg.Connection], Any]:
        m = {
            "tool_id": runtime,
            "tool_type": "runtime",
            "executor": "subprocess",
            "version": version,
            "config": {"env": {"LEVEL": level}},
        }
        return lambda c: c.execute("select publish_tool_version(%s::jsonb)", (json.dumps(m),)).fetchone()[0]

    def publish_script(i: int) -> Callable[[psycopg.Connection], Any]:
        m = {"tool_id": f"{tool_id}_s{i}", "tool_type": "script", "executor": runtime, "version": "1.0.0"}
        files = [{"path": "main.sh", "content_text": f"echo {i}"}]
        return lambda c: c.execute(
            "select publish_tool_version(%s::jsonb, %s::jsonb)", (json.dumps(m), json.dumps(files))
        ).fetchone()[0]

    publish_runtime("1.0.0", "one")(conn)
    try:
        results = run_together(database_url, [publish_runtime("2.0.0", "two")] + [publish_script(i) for i in range(10)])
        assert [r for r in results if isinstance(r, Exception)] == []
        levels = conn.execute(
            "select resolve_execution_plan(t.ref) #>> '{config,env,LEVEL}' from tools t where t.ref like %s",
            (f"{tool_id}_s%",),
        ).fetchall()
        assert levels == [("two",)] * 10, "every script runs on the runtime's latest version"
        # A cached plan that could be served (all its versions still latest) equals a fresh one.
        stale = conn.execute(
            """select pc.tool_ref from kiwi_internal.plan_cache pc
                where pc.tool_ref like %s
                  and (select count(*) from tool_versions v where v.id = any (pc.chain_versions) and v.is_latest)
                      = cardinality(pc.chain_versions)
                  and pc.plan is distinct from (kiwi_internal.compute_plan(pc.version_uuid, true, '{}')).plan""",
            (f"{tool_id}%",),
        ).fetchall()
        assert stale == []
    finally:
        conn.execute("delete from tools where ref like %s and tool_type = 'script'", (f"{tool_id}_s%",))
        conn.execute("delete from tools where ref = %s", (runtime,))
