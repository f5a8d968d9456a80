"""An approval is for the content it approved, whatever the caller leaves out.

Found by an attacker's trial: `use_approval(..., p_content_hash => null)` skipped the "tool
changed since approval" check, so an approval given for one version of a tool ran another.
Now a call that gives no content_hash cannot use an approval that recorded one, through
use_approval or the gate. Real parts: the real database, a real policy, a real approval
requested through the gate as a signed-in user (PostgREST's role and claims), decided by
an admin, and a second version published after it.
"""

from __future__ import annotations

import json
import uuid
from collections.abc import Callable, Iterator
from typing import Any

import psycopg
import pytest
from psycopg.types.json import Jsonb

SHA = "a" * 64


@pytest.fixture
def guarded(publish_tool: Callable[..., str], conn: psycopg.Connection) -> Iterator[str]:
    tool = publish_tool("guarded", {"tool_type": "script", "executor": "bash_runtime"}, {"run.sh": "echo '{}'\n"})
    conn.execute("insert into approval_policies (pattern, ttl_seconds) values (%s, 600)", (tool,))
    yield tool
    conn.execute("delete from approvals where tool_id = %s", (tool,))
    conn.execute("delete from approval_policies where pattern = %s", (tool,))


def content_hash(conn: psycopg.Connection, tool: str, version: str) -> str:
    row = conn.execute(
        "select v.content_hash from tool_versions v join tools t on t.id = v.tool_uuid"
        " where t.ref = %s and v.version = %s",
        (tool, version),
    ).fetchone()
    assert row is not None
    return str(row[0])


def as_user(database_url: str, user: str, sql: str, args: tuple[Any, ...]) -> Any:
    """One statement as a signed-in user, as PostgREST runs it; a refusal is returned, not raised."""
    with psycopg.connect(database_url) as c:
        claims = {"sub": user, "role": "authenticated", "aud": "authenticated"}
        c.execute(
            "select set_config('request.jwt.claims', %s, true), set_config('role', 'authenticated', true)",
            (json.dumps(claims),),
        )
        try:
            row = c.execute(sql, args).fetchone()
        except psycopg.Error as e:
            return e
        return row[0] if row else None


def test_an_approval_of_one_version_cannot_run_another_by_leaving_the_hash_out(
    database_url: str, conn: psycopg.Connection, guarded: str
) -> None:
    user = str(uuid.uuid4())
    first = content_hash(conn, guarded, "1.0.0")
    call = {"tool_id": guarded, "params_sha256": SHA, "version": "1.0.0", "content_hash": first}
    held = as_user(database_url, user, "select public.check_call(%s)", (Jsonb(call),))
    assert held["kind"] == "approval_pending", held
    approval = held["approval"]["id"]
    conn.execute("select decide_approval(%s, true)", (approval,))

    # the tool changes after the approval
    conn.execute(
        "select publish_tool_version(%s, %s)",
        (
            Jsonb({"tool_id": guarded, "version": "1.0.1", "tool_type": "script", "executor": "bash_runtime"}),
            Jsonb([{"path": "run.sh", "content_text": "echo changed\n"}]),
        ),
    )
    assert content_hash(conn, guarded, "1.0.1") != first

    refused = as_user(database_url, user, "select use_approval(%s, %s, %s, null)", (approval, guarded, SHA))
    assert isinstance(refused, psycopg.Error) and refused.sqlstate == "PT409", refused
    assert first in str(refused) and "gives none" in str(refused)

    gate = as_user(
        database_url,
        user,
        "select public.check_call(%s)",
        (Jsonb({"tool_id": guarded, "params_sha256": SHA, "approval_id": approval}),),
    )
    assert gate["allowed"] is False and gate["kind"] == "approval_refused", gate

    changed = content_hash(conn, guarded, "1.0.1")
    other = as_user(database_url, user, "select use_approval(%s, %s, %s, %s)", (approval, guarded, SHA, changed))
    assert isinstance(other, psycopg.Error) and "tool changed" in str(other)

    status = conn.execute("select status from approvals where id = %s", (approval,)).fetchone()
    assert status == ("approved",), "no refused use spent the approval"
    used = as_user(database_url, user, "select use_approval(%s, %s, %s, %s)", (approval, guarded, SHA, first))
    assert used["status"] == "used"
