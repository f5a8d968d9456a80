"""Audit and rate limits through Kiwi's MCP server, against the real database.

Every execute call (run, dry_run, create, publish, delete, approve, deny, open_context ...) is a
row of public.audit_log, allowed or refused, with the exact
version and content_hash and the parameters' hash and size (never their values). Rate
limits are rows of public.rate_limits, enforced by public.take_rate_limit in Postgres, so
several Kiwi processes share one limit exactly.
"""

from __future__ import annotations

import json
import subprocess
import sys
import textwrap
import time
import uuid
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import Any

import psycopg
import pytest
from mcp import Client
from mcp_types import CallToolResult

from runner import PostgresRegistry, Runner, admin, build_server, local_owner
from runner.core.records import params_digest
from tests.conftest import ROOT, local_settings

SCRIPT = {"main.sh": 'read -r line; echo "{\\"got\\": $(printf %s "$line" | wc -c)}"'}


@pytest.fixture
def limits(conn: psycopg.Connection) -> Iterator[Callable[..., None]]:
    """Declare rate limits for a test; removed afterwards (their counters go with them)."""
    made: list[str] = []

    def declare(scope: str, key: str, max_calls: int, per_seconds: int) -> None:
        row = conn.execute(
            "insert into rate_limits (scope, key, max_calls, per_seconds) values (%s, %s, %s, %s) returning id",
            (scope, key, max_calls, per_seconds),
        ).fetchone()
        made.append(row[0])

    yield declare
    for limit_id in made:
        conn.execute("delete from rate_limits where id = %s", (limit_id,))


@pytest.fixture
def session(conn: psycopg.Connection) -> Iterator[str]:
    sid = f"test-audit-{uuid.uuid4()}"
    yield sid
    conn.execute("delete from audit_log where session_id = %s", (sid,))


def audit_rows(conn: psycopg.Connection, session_id: str) -> list[dict[str, Any]]:
    rows = conn.execute(
        "select to_jsonb(a) from audit_log a where session_id = %s order by at, id", (session_id,)
    ).fetchall()
    return [r[0] for r in rows]


def text_of(result: CallToolResult) -> str:
    return "\n".join(getattr(block, "text", "") for block in result.content)


async def test_an_allowed_call_is_audited_and_a_refused_one_says_when_to_retry(
    database_url: str,
    conn: psycopg.Connection,
    tmp_path: Path,
    publish_tool: Callable[..., str],
    limits: Callable[..., None],
    session: str,
) -> None:
    tool = publish_tool(
        "audit_echo",
        {"tool_type": "script", "executor": "bash_runtime", "parameters": [{"name": "token", "type": "string"}]},
        SCRIPT,
        entrypoint="main.sh",
    )
    limits("tool", tool, 1, 3600)
    content_hash = conn.execute(
        "select v.content_hash from tool_versions v join tools t on t.id = v.tool_uuid where t.ref = %s", (tool,)
    ).fetchone()[0]
    secret = f"s3cret-{uuid.uuid4().hex}"
    params = {"token": secret}

    settings = local_settings(database_url, tmp_path)
    runner = Runner(PostgresRegistry(database_url, principal=local_owner()), settings)
    try:
        async with Client(build_server(runner, session_id=session)) as client:
            first = await client.call_tool("execute", {"action": "run", "item_id": tool, "parameters": params})
            second = await client.call_tool("execute", {"action": "run", "item_id": tool, "parameters": params})
    finally:
        await runner.aclose()

    assert not first.is_error, text_of(first)
    assert second.is_error, "the second call within the window is refused"
    refusal = second.structured_content or {}
    assert refusal["error"]["kind"] == "rate_limited"
    assert 0 < refusal["retry_after_s"] <= 3600, "a refused call says when to retry"
    assert "retry" in text_of(second) and "rate limit" in text_of(second)

    allowed, refused = audit_rows(conn, session)
    assert allowed["decision"] == "allowed" and allowed["outcome"] == "success"
    assert (allowed["tool_id"], allowed["version"], allowed["content_hash"]) == (tool, "1.0.0", content_hash)
    assert allowed["duration_ms"] > 0 and allowed["action"] == "run"
    assert refused["decision"] == "refused" and refused["outcome"] is None
    assert refused["reason"].startswith(f"rate limit: tool {tool} allows 1 call(s) per 3600 s")
    assert float(refused["retry_after_s"]) == pytest.approx(refusal["retry_after_s"], abs=1)
    assert refused["content_hash"] == content_hash, "a refused call still names the version it would have run"

    digest, size = params_digest(params)
    for row in (allowed, refused):
        assert (row["params_sha256"], row["params_size"]) == (digest, size)
        assert secret not in json.dumps(row), "parameter values are never stored"


async def test_a_dry_run_is_audited_too(
    database_url: str, conn: psycopg.Connection, tmp_path: Path, session: str
) -> None:
    settings = local_settings(database_url, tmp_path)
    runner = Runner(PostgresRegistry(database_url, principal=local_owner()), settings)
    try:
        async with Client(build_server(runner, session_id=session)) as client:
            result = await client.call_tool(
                "execute", {"action": "dry_run", "item_id": "hello_world", "parameters": {"name": "Ada"}}
            )
            missing = await client.call_tool("execute", {"action": "run", "item_id": f"no_such_{uuid.uuid4().hex}"})
    finally:
        await runner.aclose()
    assert not result.is_error, text_of(result)
    assert missing.is_error
    dry, unknown = audit_rows(conn, session)
    assert (dry["action"], dry["tool_id"], dry["decision"], dry["outcome"]) == (
        "dry_run",
        "hello_world",
        "allowed",
        "success",
    )
    assert dry["content_hash"] and dry["version"]
    # a call of a tool that does not exist is refused before the gate, and audited as such
    assert (unknown["decision"], unknown["outcome"], unknown["content_hash"]) == ("refused", None, None)
    assert "not found" in unknown["reason"]


WORKER = textwrap.dedent(
    """
    import asyncio, json, sys, time
    from runner.principal import admin, local_owner
    from runner.registry import PostgresRegistry

    async def main(url, tool, start_at, calls):
        async with PostgresRegistry(url, principal=local_owner(), cache_plans=False) as reg:
            await reg.take_rate_limit("warm_up_no_limit_" + tool, None, None)
            time.sleep(max(0.0, start_at - time.time()))
            answers = [await reg.take_rate_limit(tool, None, None) for _ in range(calls)]
        print(json.dumps([a["allowed"] for a in answers]))

    asyncio.run(main(sys.argv[1], sys.argv[2], float(sys.argv[3]), int(sys.argv[4])))
    """
)


def test_two_processes_share_one_rate_limit_exactly(
    database_url: str, conn: psycopg.Connection, limits: Callable[..., None]
) -> None:
    tool = f"rl_shared_{uuid.uuid4().hex[:8]}"
    limits("tool", tool, 7, 3600)
    start_at = time.time() + 2.0
    procs = [
        subprocess.Popen(
            [sys.executable, "-c", WORKER, database_url, tool, str(start_at), "25"],
            cwd=ROOT,
            stdout=subprocess.PIPE,
            stderr=subprocess.PIPE,
            text=True,
        )
        for _ in range(2)
    ]
    answers = []
    for p in procs:
        out, err = p.communicate(timeout=60)
        assert p.returncode == 0, err
        answers.append(json.loads(out))
    allowed = [sum(a) for a in answers]
    assert sum(allowed) == 7, f"the processes were allowed {allowed} calls; the shared limit is 7"
    counted = conn.execute(
        "select c.calls from kiwi_internal.rate_limit_counters c join rate_limits l on l.id = c.limit_id"
        " where l.key = %s",
        (tool,),
    ).fetchone()[0]
    assert counted == 7, "refused calls take nothing from the limit"


async def test_create_publish_and_delete_each_leave_a_row_without_the_manifest(
    database_url: str, conn: psycopg.Connection, tmp_path: Path, session: str
) -> None:
    name = f"audit_publish_{uuid.uuid4().hex[:8]}"
    tool = f"local/{name}"  # the agent acts as the local owner, who publishes into its namespace
    marker = f"manifest-text-{uuid.uuid4().hex}"
    manifest = {
        "tool_id": name,
        "namespace": "local",
        "tool_type": "script",
        "executor": "bash_runtime",
        "version": "1.0.0",
        "entrypoint": "main.sh",
        "description": marker,
    }
    files = [{"path": "main.sh", "content_text": f"echo '{{}}' # {marker}", "is_entrypoint": True}]
    runner = Runner(PostgresRegistry(database_url, principal=local_owner()), local_settings(database_url, tmp_path))
    try:
        async with Client(build_server(runner, session_id=session)) as client:
            created = await client.call_tool("execute", {"action": "create", "manifest": manifest, "files": files})
            published = await client.call_tool(
                "execute", {"action": "publish", "manifest": {**manifest, "version": "1.1.0"}, "files": files}
            )
            bad = await client.call_tool(
                "execute",
                {"action": "publish", "manifest": {**manifest, "version": "not a version"}, "files": files},
            )
            preview = await client.call_tool("execute", {"action": "delete", "item_id": tool})
            deleted = await client.call_tool("execute", {"action": "delete", "item_id": tool, "confirm": True})
            gone = await client.call_tool("execute", {"action": "delete", "item_id": tool, "confirm": True})
    finally:
        await runner.aclose()
        conn.execute("delete from tools where ref = %s", (tool,))

    for ok in (created, published, preview, deleted):
        assert not ok.is_error, text_of(ok)
    assert bad.is_error and gone.is_error
    rows = audit_rows(conn, session)
    assert [(r["action"], r["decision"], r["outcome"]) for r in rows] == [
        ("create", "allowed", "success"),
        ("publish", "allowed", "success"),
        ("publish", "refused", None),
        ("delete", "allowed", None),
        ("delete", "allowed", "success"),
        ("delete", "refused", None),
    ]
    create, publish, refused, preview_row, delete, missing = rows
    assert (create["tool_id"], create["version"]) == (tool, "1.0.0")
    assert (publish["tool_id"], publish["version"]) == (tool, "1.1.0")
    assert publish["content_hash"] == published.structured_content["content_hash"]
    assert create["content_hash"] == created.structured_content["content_hash"] != publish["content_hash"]
    assert refused["tool_id"] == tool and refused["reason"], "a refusal says why"
    assert preview_row["reason"].startswith("preview"), "a delete without confirm deletes nothing"
    assert delete["tool_id"] == tool and missing["reason"]
    for row in rows:
        assert row["session_id"] == session and row["duration_ms"] >= 0
        assert row["params_sha256"] and row["params_size"] > 0, "the inputs are stored as a hash and size"
        assert marker not in json.dumps(row), "the manifest and files are never stored"


async def test_approve_deny_and_open_context_leave_rows(
    database_url: str, conn: psycopg.Connection, tmp_path: Path, publish_tool: Callable[..., str], session: str
) -> None:
    tool = publish_tool(
        "audit_approved",
        {"tool_type": "script", "executor": "bash_runtime", "parameters": [{"name": "token", "type": "string"}]},
        SCRIPT,
        entrypoint="main.sh",
    )
    conn.execute("insert into approval_policies (pattern, ttl_seconds) values (%s, 3600)", (tool,))
    requester = f"{session}-requester"
    runner = Runner(PostgresRegistry(database_url, principal=local_owner()), local_settings(database_url, tmp_path))
    # calls of `public` tools are decided by an admin: the deciding server is started as one
    person = Runner(PostgresRegistry(database_url, principal=admin()), local_settings(database_url, tmp_path))
    try:
        async with (
            Client(build_server(runner, session_id=requester)) as asking,
            Client(build_server(person, session_id=session)) as deciding,
        ):
            ids = []
            for token in ("one", "two"):
                pending = await asking.call_tool(
                    "execute", {"action": "run", "item_id": tool, "parameters": {"token": token}}
                )
                ids.append(pending.structured_content["approval"]["id"])
            approved = await deciding.call_tool("execute", {"action": "approve", "approval_id": ids[0]})
            denied = await deciding.call_tool(
                "execute", {"action": "deny", "item_id": ids[1], "parameters": {"reason": "no"}}
            )
            again = await deciding.call_tool("execute", {"action": "deny", "approval_id": ids[1]})
            opened = await deciding.call_tool("execute", {"action": "open_context", "permissions": {"shell": []}})
    finally:
        await runner.aclose()
        await person.aclose()
        conn.execute("delete from approval_policies where pattern = %s", (tool,))
        conn.execute("delete from audit_log where session_id = %s", (requester,))

    for ok in (approved, denied, opened):
        assert not ok.is_error, text_of(ok)
    assert again.is_error
    rows = audit_rows(conn, session)
    assert [(r["action"], r["decision"], r["outcome"]) for r in rows] == [
        ("approve", "allowed", "success"),
        ("deny", "allowed", "success"),
        ("deny", "refused", None),
        ("open_context", "allowed", "success"),
    ]
    assert [r["tool_id"] for r in rows[:2]] == [tool, tool], "a decision names the approval's tool"
    assert rows[2]["reason"], "a refused decision says why"
    context_id = opened.structured_content["context"]["id"]
    assert rows[3]["tool_id"] == f"context:{context_id}"
