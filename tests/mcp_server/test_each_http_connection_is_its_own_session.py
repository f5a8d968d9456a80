"""Over streamable HTTP, each MCP session is audited (and rate-limited) in a session of its own:
the server's session and the transport's id for it. Many callers share one `kiwi serve --transport
http`, so one server-wide session would mix their rows. (Stdio has one client and keeps the
server's; so does the sessionless protocol of 2026, whose requests carry no session id.) Real
parts: a real `kiwi serve` process, raw HTTP as a 2025-06-18 client sends it, the real database."""

from __future__ import annotations

from collections.abc import Callable, Iterator
from pathlib import Path

import httpx
import psycopg
import pytest

from runner.testing.http_serving import Served, kiwi_http_server, user_token

VERSION = "2025-06-18"  # the last protocol version with sessions (Mcp-Session-Id)
HEADERS = {"Accept": "application/json, text/event-stream", "Content-Type": "application/json"}


@pytest.fixture
def tool(publish_tool: Callable[..., str], conn: psycopg.Connection) -> Iterator[str]:
    ref = publish_tool(
        "per_session",
        {"tool_type": "script", "executor": "bash_runtime", "parameters": []},
        {"run.sh": "echo '{}'\n"},
        entrypoint="run.sh",
    )
    yield ref
    conn.execute("delete from audit_log where tool_id = %s", (ref,))


def dry_run_in_a_new_session(served: Served, token: str, tool: str) -> str:
    """initialize, initialized, then a dry_run of `tool`: the session's id."""
    auth = {**HEADERS, "Authorization": f"Bearer {token}"}
    hello = {"protocolVersion": VERSION, "capabilities": {}, "clientInfo": {"name": "t", "version": "1"}}
    opened = httpx.post(
        served.url, json={"jsonrpc": "2.0", "id": 1, "method": "initialize", "params": hello}, headers=auth
    )
    assert opened.status_code == 200, opened.text
    session = opened.headers["mcp-session-id"]
    inside = {**auth, "Mcp-Session-Id": session, "MCP-Protocol-Version": VERSION}
    sent = httpx.post(served.url, json={"jsonrpc": "2.0", "method": "notifications/initialized"}, headers=inside)
    assert sent.status_code == 202, sent.text
    call = {"name": "execute", "arguments": {"action": "dry_run", "item_id": tool, "parameters": {}}}
    answer = httpx.post(
        served.url, json={"jsonrpc": "2.0", "id": 2, "method": "tools/call", "params": call}, headers=inside, timeout=60
    )
    assert answer.status_code == 200 and '"isError":false' in answer.text.replace(" ", ""), answer.text
    return session


def test_two_http_sessions_are_audited_in_two_sessions(
    database_url: str, conn: psycopg.Connection, tool: str, tmp_path: Path
) -> None:
    token = user_token()
    with kiwi_http_server(database_url, tmp_path / "serve") as served:
        ids = [dry_run_in_a_new_session(served, token, tool) for _ in range(2)]
    audited = [r[0] for r in conn.execute("select session_id from audit_log where tool_id = %s order by at", (tool,))]
    assert [s.partition("/")[2] for s in audited] == ids, (audited, ids)
    assert len({s.partition("/")[0] for s in audited}) == 1, "both under the one server"
