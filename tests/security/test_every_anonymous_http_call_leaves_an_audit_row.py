"""Every call over HTTP leaves an audit row, anonymous ones included, and anonymous rows are bounded.

Found by an attacker's trial: anonymous callers (the project's anon key) ran public tools over
`kiwi serve --transport http` and left no audit row ("permission denied for function
record_audits"). Now an anonymous caller's rows are written in its name (`role:anon`, role
anon: never taken from the entry), allowed or refused, and they are bounded: all anonymous
callers together write at most `registry_limits.anon_audit_rows_per_minute` rows a minute, and
the gate refuses anonymous calls once that is used up, so an anonymous call that runs can be
audited. Real parts: a real `kiwi serve --transport http` process, the official MCP SDK client
over streamable HTTP with a signed anon token, the real database.
"""

from __future__ import annotations

import json
from collections.abc import Callable, Iterator
from datetime import UTC, datetime
from pathlib import Path
from typing import Any

import psycopg
import pytest
from psycopg.types.json import Jsonb

from runner import LOCAL_JWT_SECRET
from runner import sign_token as sign
from runner.testing.http_serving import kiwi_http_server, mcp_client

SCRIPT = {"run.sh": "echo '{\"said\": true}'\n"}


def anon_token() -> str:
    """The project's anon key, as Supabase signs it: role anon, no user."""
    return sign({"role": "anon", "iss": "supabase-demo"}, LOCAL_JWT_SECRET, expires_in_s=600)


@pytest.fixture
def public_tool(publish_tool: Callable[..., str], conn: psycopg.Connection) -> Iterator[str]:
    """A public tool anyone may run, with a limit of 1 call an hour (so a second call is refused)."""
    tool = publish_tool(
        "anon_audited",
        {
            "tool_type": "script",
            "executor": "bash_runtime",
            "parameters": [{"name": "word", "type": "string", "required": True}],
        },
        SCRIPT,
        entrypoint="run.sh",
    )
    row = conn.execute(
        "insert into rate_limits (scope, key, max_calls, per_seconds) values ('tool', %s, 1, 3600) returning id",
        (tool,),
    ).fetchone()
    yield tool
    conn.execute("delete from rate_limits where id = %s", row)
    conn.execute("delete from audit_log where tool_id = %s", (tool,))


def audit_rows(conn: psycopg.Connection, tool: str, since: datetime) -> list[dict[str, Any]]:
    rows = conn.execute(
        "select to_jsonb(a) from audit_log a where tool_id = %s and at >= %s order by at, id", (tool, since)
    ).fetchall()
    return [r[0] for r in rows]


async def test_anonymous_calls_over_http_each_leave_an_audit_row(
    database_url: str, conn: psycopg.Connection, public_tool: str, tmp_path: Path
) -> None:
    since = datetime.now(UTC)
    with kiwi_http_server(database_url, tmp_path / "serve") as served:
        async with mcp_client(served.url, anon_token()) as client:
            dry = await client.call_tool(
                "execute", {"action": "dry_run", "item_id": public_tool, "parameters": {"word": "a"}}
            )
            assert not dry.is_error, dry.content
            ran = await client.call_tool(
                "execute", {"action": "run", "item_id": public_tool, "parameters": {"word": "b"}}
            )
            assert not ran.is_error, ran.content
            limited = await client.call_tool(
                "execute", {"action": "run", "item_id": public_tool, "parameters": {"word": "c"}}
            )
            assert limited.is_error and limited.structured_content["error"]["kind"] == "rate_limited"
            bad = await client.call_tool("execute", {"action": "run", "item_id": public_tool, "parameters": {}})
            assert bad.is_error
    # the server has stopped: whatever it had queued is written
    rows = audit_rows(conn, public_tool, since)
    assert [(r["action"], r["decision"], r["outcome"]) for r in rows] == [
        ("dry_run", "allowed", "success"),
        ("run", "allowed", "success"),
        ("run", "refused", None),
        ("run", "refused", None),
    ], rows
    assert {(r["caller"], r["caller_role"]) for r in rows} == {("role:anon", "anon")}, "marked anonymous"
    assert "rate limit" in rows[2]["reason"] and "word" in rows[3]["reason"]
    assert "not saved" not in served.stderr(), served.stderr()


class Anon:
    """One rolled-back transaction (nothing it changes is seen by anyone else, the budget
    included) in which statements run with the anon key's role and claims, as PostgREST
    runs them; claims that name someone change nothing."""

    def __init__(self, conn: psycopg.Connection) -> None:
        self.conn = conn

    def __call__(self, sql: str, args: tuple[Any, ...] = ()) -> list[Any]:
        claims = json.dumps({"role": "anon", "sub": "00000000-0000-4000-8000-000000000001"})
        self.conn.execute(
            "select set_config('request.jwt.claims', %s, true), set_config('role', 'anon', true)", (claims,)
        )
        answer = [r[0] for r in self.conn.execute(sql, args).fetchall()]  # a refusal: undone by its savepoint
        self.conn.execute("select set_config('role', 'none', true), set_config('request.jwt.claims', '', true)")
        return answer

    def refusal(self, sql: str, args: tuple[Any, ...] = ()) -> psycopg.Error:
        with pytest.raises(psycopg.Error) as raised, self.conn.transaction():
            self(sql, args)
        return raised.value


@pytest.fixture
def anon(database_url: str) -> Iterator[Anon]:
    with psycopg.connect(database_url, autocommit=True) as conn, conn.transaction(force_rollback=True):
        yield Anon(conn)


def test_anonymous_rows_are_written_in_anons_name_and_bounded(public_tool: str, anon: Anon) -> None:
    since = datetime.now(UTC)
    anon.conn.execute("update registry_limits set value = '3' where name = 'anon_audit_rows_per_minute'")
    anon.conn.execute("delete from kiwi_internal.anon_audit_window")
    entry = Jsonb({"session_id": "anon-flood", "tool_id": public_tool, "decision": "refused", "reason": "x" * 2000})

    assert len(anon("select public.record_audits(jsonb_build_array(%s, %s))", (entry, entry))) == 2
    rows = audit_rows(anon.conn, public_tool, since)
    assert {(r["caller"], r["caller_role"]) for r in rows} == {("role:anon", "anon")}, "never the claims' sub"

    flood = anon.refusal("select public.record_audits(jsonb_build_array(%s, %s))", (entry, entry))
    assert flood.sqlstate == "PT429" and "anon_audit_rows_per_minute" in str(flood) and "retry" in str(flood)
    assert len(audit_rows(anon.conn, public_tool, since)) == 2, "all or nothing: the refused batch wrote none"

    assert len(anon("select public.record_audit(%s)", (entry,))) == 1
    call = Jsonb({"tool_id": public_tool, "params_sha256": "a" * 64, "dry_run": True})
    (verdict,) = anon("select public.check_call(%s)", (call,))
    assert verdict["allowed"] is False and verdict["kind"] == "rate_limited", verdict
    assert "anon_audit_rows_per_minute" in verdict["reason"] and float(verdict["retry_after_s"]) > 0
