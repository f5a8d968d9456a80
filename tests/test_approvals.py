"""Approvals through Kiwi's MCP server and the kiwi CLI, against the real database.

A tool under an approval policy does not run when first called: a pending approval is
recorded (parameters only as sha256 and size) and the call answers with its id. A person
decides (`kiwi approve ID`, `kiwi deny ID`, or MCP execute approve/deny from another
session); the same call with approval_id=ID then runs once. Expired, denied, used, or
given for other parameters: refused, and the tool does not run.
"""

from __future__ import annotations

import json
import time
import uuid
from collections.abc import AsyncIterator, Callable, Iterator
from contextlib import asynccontextmanager
from pathlib import Path
from typing import Any

import psycopg
import pytest
from mcp import Client
from mcp_types import CallToolResult

from runner import PostgresRegistry, Principal, Runner, admin, build_server, local_owner
from runner.core.records import params_digest
from tests.conftest import local_settings
from tests.kiwi_cli import Done, kiwi_env, run_kiwi

# Appends a line to the marker file it is given, so that a test can count the runs.
SCRIPT = {"main.sh": 'read -r line; echo ran >> "$KIWI_PARAM_MARKER"; echo \'{"ran": true}\''}
MANIFEST = {
    "tool_type": "script",
    "executor": "bash_runtime",
    "parameters": [{"name": "marker", "type": "string"}, {"name": "token", "type": "string"}],
}


@pytest.fixture
def marker(tmp_path: Path) -> Path:
    """The marker file the tool appends to, in a directory its sandbox's user (nobody) may write."""
    marks = tmp_path / "marks"
    marks.mkdir(mode=0o777)
    marks.chmod(0o777)
    return marks / "marker.txt"


def writing(marker: Path) -> dict[str, Any]:
    """MANIFEST with its sandbox granted the marker's directory (the tests publish as an admin,
    who may grant a host path)."""
    return {**MANIFEST, "config": {"sandbox": {"fs": {"write": [str(marker.parent)]}}}}


@pytest.fixture
def guarded_tool(
    conn: psycopg.Connection, publish_tool: Callable[..., str], marker: Path
) -> Iterator[Callable[[int], str]]:
    """`guarded_tool(ttl_seconds)`: a fresh tool under its own approval policy, writing `marker`;
    the policy, its approvals and the audit rows of the tool are removed afterwards."""
    made: list[str] = []

    def make(ttl_seconds: int = 3600) -> str:
        tool = publish_tool("approval_guarded", writing(marker), SCRIPT, entrypoint="main.sh")
        conn.execute("insert into approval_policies (pattern, ttl_seconds) values (%s, %s)", (tool, ttl_seconds))
        made.append(tool)
        return tool

    yield make
    for tool in made:
        conn.execute("delete from approval_policies where pattern = %s", (tool,))
        conn.execute("delete from approvals where tool_id = %s", (tool,))
        conn.execute("delete from audit_log where tool_id = %s", (tool,))


@pytest.fixture
def kiwi(database_url: str, tmp_path: Path) -> Callable[..., Done]:
    """`kiwi(*args)`: the CLI as a process in an empty directory, against the test database."""
    workdir = tmp_path / "cwd"
    workdir.mkdir()
    env = kiwi_env(database_url, tmp_path / "cache")

    def run(*args: str) -> Done:
        return run_kiwi(args, cwd=workdir, env=env)

    return run


@pytest.fixture
def mcp(database_url: str, conn: psycopg.Connection, tmp_path: Path) -> Iterator[Callable[..., Any]]:
    """`async with mcp() as client`: an in-memory MCP client of a Kiwi server with a session of its
    own, acting as the local owner (or as `mcp(principal)`); the sessions' audit rows are removed
    afterwards."""
    sessions: list[str] = []

    @asynccontextmanager
    async def open_client(principal: Principal | None = None) -> AsyncIterator[Client]:
        session_id = f"test-approvals-{uuid.uuid4()}"
        sessions.append(session_id)
        settings = local_settings(database_url, tmp_path)
        runner = Runner(PostgresRegistry(database_url, principal=principal or local_owner()), settings)
        try:
            async with Client(build_server(runner, session_id=session_id)) as client:
                yield client
        finally:
            await runner.aclose()

    yield open_client
    for session_id in sessions:
        conn.execute("delete from audit_log where session_id = %s", (session_id,))


def text_of(result: CallToolResult) -> str:
    return "\n".join(getattr(block, "text", "") for block in result.content)


def runs(marker: Path) -> int:
    return len(marker.read_text().splitlines()) if marker.exists() else 0


async def run(client: Client, tool: str, params: dict[str, Any], approval_id: str | None = None) -> CallToolResult:
    args: dict[str, Any] = {"action": "run", "item_id": tool, "parameters": params}
    if approval_id:
        args["approval_id"] = approval_id
    return await client.call_tool("execute", args)


def kind_of(result: CallToolResult) -> str | None:
    return ((result.structured_content or {}).get("error") or {}).get("kind")


async def test_a_call_waits_for_approval_then_runs_once_and_keeps_parameter_values_only_while_pending(
    conn: psycopg.Connection, marker: Path, guarded_tool: Callable[[int], str], kiwi: Callable[..., Done], mcp: Any
) -> None:
    tool = guarded_tool(3600)
    secret = f"s3cret-{uuid.uuid4().hex}"
    params = {"marker": str(marker), "token": secret}

    async with mcp() as client:
        pending = await run(client, tool, params)
        assert pending.is_error and kind_of(pending) == "approval_pending", text_of(pending)
        assert runs(marker) == 0, "a call that needs approval does not run"
        approval = pending.structured_content["approval"]
        aid = approval["id"]
        assert approval["status"] == "pending" and approval["expires_at"]
        assert f"kiwi approve {aid}" in text_of(pending), "the answer says how to decide"

        listed = kiwi("approvals", "--json")
        assert listed.code == 0, listed.err
        assert aid in [row["id"] for row in json.loads(listed.out)], "kiwi approvals lists the pending one"
        shown = next(row for row in json.loads(listed.out) if row["id"] == aid)
        assert shown["params"] == params, "whoever decides sees the parameters the approval is bound to"

        early = await run(client, tool, params, aid)
        assert kind_of(early) == "approval_refused" and "pending" in text_of(early)

        approved = kiwi("--admin", "approve", aid, "--reason", "looks fine", "--json")
        assert approved.code == 0, approved.err
        assert json.loads(approved.out)["status"] == "approved"

        first = await run(client, tool, params, aid)
        assert not first.is_error, text_of(first)
        assert runs(marker) == 1, "the approved call runs"
        again = await run(client, tool, params, aid)
        assert again.is_error and kind_of(again) == "approval_refused"
        assert "already used" in text_of(again)
        assert runs(marker) == 1, "an approved call runs once"

    decided = kiwi("--admin", "approve", aid)
    assert decided.code == 4 and "not pending" in decided.err, "a used approval cannot be decided again"

    row = conn.execute("select to_jsonb(a) from approvals a where id = %s", (aid,)).fetchone()[0]
    digest, size = params_digest(params)
    assert (row["status"], row["params_sha256"], row["params_size"]) == ("used", digest, size)
    assert row["decided_by"] and row["reason"] == "looks fine" and row["used_at"]
    audited = [
        r[0]
        for r in conn.execute(
            "select to_jsonb(a) from audit_log a where tool_id = %s order by at, id", (tool,)
        ).fetchall()
    ]
    decisions = [a for a in audited if a["action"] == "approve"]  # kiwi approve's own row
    assert [(a["decision"], a["outcome"], a["version"]) for a in decisions] == [("allowed", "success", "1.0.0")]
    audited = [a for a in audited if a["action"] == "run"]
    assert [(a["decision"], a["outcome"]) for a in audited] == [
        ("refused", None),
        ("refused", None),
        ("allowed", "success"),
        ("refused", None),
    ]
    assert audited[0]["reason"].startswith(f"pending approval {aid}")
    assert audited[1]["reason"].startswith("approval refused:") and "pending" in audited[1]["reason"]
    assert "already used" in audited[3]["reason"]
    assert secret not in json.dumps(row) and secret not in json.dumps(audited), "parameter values are never stored"
    kept = conn.execute("select count(*) from kiwi_internal.approval_inputs where approval_id = %s", (aid,)).fetchone()
    assert kept == (0,), "an approval's parameters go once it is used"


async def test_different_parameters_and_a_denied_call_are_refused(
    marker: Path, guarded_tool: Callable[[int], str], mcp: Any
) -> None:
    tool = guarded_tool(3600)
    params = {"marker": str(marker), "token": "a"}

    # the tools are in `public`, whose calls only an admin decides: the person is one, explicitly
    async with mcp() as agent, mcp(admin()) as person:
        first = await run(agent, tool, params)
        aid = first.structured_content["approval"]["id"]
        selfish = await agent.call_tool("execute", {"action": "approve", "approval_id": aid})
        assert selfish.is_error and "cannot decide approval" in text_of(selfish), "an agent cannot approve its own call"
        ok = await person.call_tool("execute", {"action": "approve", "item_id": aid})
        assert not ok.is_error, text_of(ok)
        assert ok.structured_content["approval"]["status"] == "approved"

        other = await run(agent, tool, {**params, "token": "b"}, aid)
        assert kind_of(other) == "approval_refused" and "different parameters" in text_of(other)
        assert runs(marker) == 0, "an approval covers exactly the parameters it was given for"

        second = await run(agent, tool, params)
        denied_id = second.structured_content["approval"]["id"]
        denied = await person.call_tool(
            "execute", {"action": "deny", "approval_id": denied_id, "parameters": {"reason": "not today"}}
        )
        assert not denied.is_error and denied.structured_content["approval"]["status"] == "denied"
        refused = await run(agent, tool, params, denied_id)
        assert kind_of(refused) == "approval_refused" and "denied: not today" in text_of(refused)
        assert runs(marker) == 0

        # the first approval still holds for its own parameters
        done = await run(agent, tool, params, aid)
        assert not done.is_error, text_of(done)
        assert runs(marker) == 1


async def test_an_approval_that_expires_cannot_be_used(
    conn: psycopg.Connection,
    marker: Path,
    guarded_tool: Callable[[int], str],
    kiwi: Callable[..., Done],
    mcp: Any,
) -> None:
    tool = guarded_tool(1)
    params = {"marker": str(marker), "token": "t"}

    async with mcp() as agent:
        pending = await run(agent, tool, params)
        lapsed = pending.structured_content["approval"]["id"]
        approved = await run(agent, tool, params)
        aid = approved.structured_content["approval"]["id"]
        # approved in time (as an admin would, from the SQL editor), then its hour is over
        conn.execute("select decide_approval(%s, true)", (aid,))
        time.sleep(1.2)

        late = kiwi("--admin", "approve", lapsed)
        assert late.code == 4 and "expired" in late.err, "a pending approval expires"
        listed = kiwi("approvals", "--json")
        assert lapsed not in [row["id"] for row in json.loads(listed.out)], "expired ones are not pending"

        refused = await run(agent, tool, params, aid)
        assert kind_of(refused) == "approval_refused" and "expired" in text_of(refused)
        assert runs(marker) == 0, "an expired approval runs nothing"

    status = conn.execute("select status from approvals where id = %s", (aid,)).fetchone()[0]
    assert status == "approved", "expiry is computed on read; the stored status is not rewritten"


async def test_a_tool_without_a_policy_runs_at_once_and_dry_run_needs_no_approval(
    marker: Path, publish_tool: Callable[..., str], guarded_tool: Callable[[int], str], mcp: Any
) -> None:
    free = publish_tool("approval_free", writing(marker), SCRIPT, entrypoint="main.sh")
    guarded = guarded_tool(3600)
    params = {"marker": str(marker), "token": "t"}
    async with mcp() as client:
        result = await run(client, free, params)
        assert not result.is_error, text_of(result)
        dry = await client.call_tool("execute", {"action": "dry_run", "item_id": guarded, "parameters": params})
        assert not dry.is_error, text_of(dry)
        unknown = await client.call_tool("execute", {"action": "approve", "approval_id": "not-a-uuid"})
        assert unknown.is_error and "not an approval id" in text_of(unknown)
    assert runs(marker) == 1
