"""`kiwi run` passes the same gate as MCP `execute`: rate limits, approvals and audit.

Found by an attacker's trial (issue 12): a rate-limited tool and an approval-gated tool
both ran from the CLI, which skipped what the MCP server applied. Here the CLI is a real
process and the MCP server the real one behind the SDK's in-memory client, both acting as
the local owner on the real database; limits and policies are real rows.
"""

from __future__ import annotations

import asyncio
import uuid
from collections.abc import Callable, Iterator
from pathlib import Path

import psycopg
import pytest
from mcp import Client

from runner import Denied, Runner, Settings, build_server, local_owner
from tests.kiwi_cli import Done, kiwi_env, run_kiwi

MARKER_SCRIPT = 'printf x >>"$KIWI_PARAM_MARKER"\necho \'{"ran": true}\'\n'


@pytest.fixture
def marks(tmp_path: Path) -> Path:
    """Where the markers go: a directory the sandbox's user (nobody) may write."""
    path = tmp_path / "marks"
    path.mkdir()
    path.chmod(0o777)
    return path


@pytest.fixture
def marked_tool(publish_tool: Callable[..., str], marks: Path) -> str:
    """A tool that appends to the file its `marker` parameter names: each run is counted there.
    Its sandbox is granted `marks` (publish_tool publishes as an admin, who may grant it)."""
    return publish_tool(
        "gated",
        {
            "tool_type": "script",
            "executor": "bash_runtime",
            "description": "counts its runs",
            "parameters": [{"name": "marker", "type": "string", "required": True}],
            "config": {"sandbox": {"fs": {"write": [str(marks)]}}},
        },
        {"run.sh": MARKER_SCRIPT},
        entrypoint="run.sh",
    )


@pytest.fixture
def limited(conn: psycopg.Connection, marked_tool: str) -> Iterator[str]:
    row = conn.execute(
        "insert into rate_limits (scope, key, max_calls, per_seconds) values ('tool', %s, 2, 3600) returning id",
        (marked_tool,),
    ).fetchone()
    yield marked_tool
    conn.execute("delete from rate_limits where id = %s", row)


@pytest.fixture
def approval_gated(conn: psycopg.Connection, marked_tool: str) -> Iterator[str]:
    conn.execute("insert into approval_policies (pattern, ttl_seconds) values (%s, 3600)", (marked_tool,))
    yield marked_tool
    conn.execute("delete from approvals where tool_id = %s", (marked_tool,))
    conn.execute("delete from approval_policies where pattern = %s", (marked_tool,))


@pytest.fixture
def kiwi(database_url: str, tmp_path: Path) -> Callable[..., Done]:
    cwd = tmp_path / "cwd"
    cwd.mkdir()

    def run(*args: str) -> Done:
        return run_kiwi(args, cwd=cwd, env=kiwi_env(database_url, tmp_path / "cache"))

    return run


@pytest.fixture
async def runner(tmp_path: Path, make_settings: Callable[..., Settings], make_runner: Callable[..., Runner]) -> Runner:
    return make_runner(make_settings(cache_dir=tmp_path / "c"))


def runs_in(marker: Path) -> int:
    return len(marker.read_text()) if marker.exists() else 0


def audit(conn: psycopg.Connection, tool: str) -> list[tuple[str, str | None, str | None]]:
    rows = conn.execute(
        "select decision, outcome, reason from audit_log where tool_id = %s order by at, id", (tool,)
    ).fetchall()
    return [(d, o, (r or "")[:40] or None) for d, o, r in rows]


async def test_a_rate_limit_refuses_the_cli_and_the_agent_alike(
    limited: str, kiwi: Callable[..., Done], runner: Runner, conn: psycopg.Connection, marks: Path
) -> None:
    marker = marks / "marker"
    first = kiwi("run", limited, "-p", f"marker={marker}")
    assert first.code == 0, first.err
    async with Client(build_server(runner)) as client:
        second = await client.call_tool(
            "execute", {"action": "run", "item_id": limited, "parameters": {"marker": str(marker)}}
        )
        assert not second.is_error
        third = await client.call_tool(
            "execute", {"action": "run", "item_id": limited, "parameters": {"marker": str(marker)}}
        )
    assert third.is_error and third.structured_content["error"]["kind"] == "rate_limited"
    fourth = kiwi("run", limited, "-p", f"marker={marker}", "--json")
    assert fourth.code == 4, "a refusal of the gate is exit 4"
    assert fourth.json()["status"] == "error"
    assert "rate limit" in fourth.json()["error"] and "retry after" in fourth.json()["error"]
    assert runs_in(marker) == 2, "the refused calls ran nothing"
    await runner.flush_records()
    # audit rows are written behind the replies (each process in its own order): compare as a set
    decisions = sorted((d, o or "") for d, o, _ in audit(conn, limited))
    assert decisions == [("allowed", "success"), ("allowed", "success"), ("refused", ""), ("refused", "")]


async def test_an_approval_holds_the_cli_and_the_agent_alike_and_runs_once(
    approval_gated: str, kiwi: Callable[..., Done], runner: Runner, conn: psycopg.Connection, marks: Path
) -> None:
    marker = marks / "marker"
    held = kiwi("run", approval_gated, "-p", f"marker={marker}")
    assert held.code == 4 and "needs approval" in held.err, held.err
    (approval_id,) = [
        str(r[0]) for r in conn.execute("select id from approvals where tool_id = %s", (approval_gated,)).fetchall()
    ]
    assert approval_id in held.err and runs_in(marker) == 0

    # the requester cannot approve its own call; an admin (a person, explicitly) does
    own = kiwi("approve", approval_id)
    assert own.code != 0 and runs_in(marker) == 0
    decided = kiwi("--admin", "approve", approval_id)
    assert decided.code == 0, decided.err

    other_params = kiwi("run", approval_gated, "-p", f"marker={marker}x", "--approval", approval_id)
    assert other_params.code == 4 and "different parameters" in other_params.err
    ran = kiwi("run", approval_gated, "-p", f"marker={marker}", "--approval", approval_id)
    assert ran.code == 0, ran.err
    again = kiwi("run", approval_gated, "-p", f"marker={marker}", "--approval", approval_id)
    assert again.code == 4 and "already used" in again.err
    assert runs_in(marker) == 1, "an approval runs one call"

    async with Client(build_server(runner)) as client:
        pending = await client.call_tool(
            "execute", {"action": "run", "item_id": approval_gated, "parameters": {"marker": str(marker)}}
        )
        assert pending.is_error and pending.structured_content["error"]["kind"] == "approval_pending"
        second_id = pending.structured_content["approval"]["id"]
        assert kiwi("--admin", "approve", second_id).code == 0
        done = await client.call_tool(
            "execute",
            {
                "action": "run",
                "item_id": approval_gated,
                "parameters": {"marker": str(marker)},
                "approval_id": second_id,
            },
        )
        assert not done.is_error, done.content
    assert runs_in(marker) == 2
    await runner.flush_records()
    reasons = [r for d, _, r in audit(conn, approval_gated) if d == "refused"]
    assert any(r and r.startswith("pending approval") for r in reasons)
    assert any(r and "different parameters" in r for r in reasons) or len(reasons) >= 3


def test_every_cli_run_is_audited_under_its_own_session(
    marked_tool: str, kiwi: Callable[..., Done], conn: psycopg.Connection, marks: Path
) -> None:
    marker = marks / "marker"
    assert kiwi("run", marked_tool, "-p", f"marker={marker}").code == 0
    assert kiwi("run", marked_tool).code == 2, "bad parameters: refused before anything runs"
    rows = conn.execute(
        "select session_id, decision, outcome, caller from audit_log where tool_id = %s order by at", (marked_tool,)
    ).fetchall()
    assert [(d, o) for _, d, o, _ in rows] == [("allowed", "success"), ("refused", None)]
    sessions = {s for s, *_ in rows}
    assert len(sessions) == 2 and all(s.startswith("cli-") for s in sessions)
    assert {c for *_, c in rows} == {str(local_owner().user_id)}
    assert uuid.UUID(next(iter(sessions))[4:])


async def test_a_long_lived_runner_remembers_only_calls_nothing_covers_and_forgets_at_a_new_rule(
    marked_tool: str, runner: Runner, conn: psycopg.Connection, marks: Path
) -> None:
    """The registry lets a call through from memory while no limit counts it and no policy covers
    it; a new limit or policy is seen at once (its notification drops what was remembered), and a
    dry run, which needs no approval, never vouches for a run."""
    marker = marks / "marker"
    params = {"marker": str(marker)}
    for _ in range(4):  # the plan cache starts listening, then remembers the untouched verdict
        assert (await runner.run(marked_tool, params)).ok
    cache = runner.registry._plan_cache  # type: ignore[attr-defined]
    assert cache is not None and cache.live
    assert any(isinstance(k, tuple) and k[0] == "gate" for k in cache._plans), "an untouched verdict is remembered"

    conn.execute("insert into approval_policies (pattern, ttl_seconds) values (%s, 600)", (marked_tool,))
    try:
        for _ in range(100):  # the notification arrives at commit; give the listener a moment
            if not any(isinstance(k, tuple) and k[0] == "gate" for k in cache._plans):
                break
            await asyncio.sleep(0.01)
        dry = await runner.run(marked_tool, params, dry_run=True)
        assert dry.ok, "a dry run needs no approval"
        held = await runner.run(marked_tool, params)
        assert isinstance(held.failure, Denied) and held.failure.kind == "approval_pending"
    finally:
        conn.execute("delete from approvals where tool_id = %s", (marked_tool,))
        conn.execute("delete from approval_policies where pattern = %s", (marked_tool,))

    row = conn.execute(
        "insert into rate_limits (scope, key, max_calls, per_seconds) values ('tool', %s, 1, 3600) returning id",
        (marked_tool,),
    ).fetchone()
    try:
        await asyncio.sleep(0.2)
        assert (await runner.run(marked_tool, params)).ok
        limited = await runner.run(marked_tool, params)
        assert isinstance(limited.failure, Denied) and limited.failure.kind == "rate_limited"
    finally:
        conn.execute("delete from rate_limits where id = %s", row)
    assert runs_in(marker) == 5
