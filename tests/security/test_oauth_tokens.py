"""OAuth tokens of remote MCP servers never reach run records, audit rows or logs (issue 17,
item 1), tried as an attacker with the database and the log files would.

A user signs in to a server guarded by a FAKE authorization server (tests/mcp/
oauth_fake_server.py), runs its tools (a refresh happens on the way, and one run fails), with
every logger at DEBUG (the SDK's OAuth flow and httpx2 included). Then every access and refresh
token the fake issued, and the client secret, is looked for in the user's tool_runs and
audit_log rows, in the stored token row, in every log record and in what the runs returned.
"""

from __future__ import annotations

import asyncio
import base64
import json
import logging
import os
import re
import time
import uuid
from pathlib import Path
from typing import Any

import httpx2
import psycopg
import pytest
from psycopg.types.json import Jsonb

from runner import McpPool, PostgresRegistry, Runner, from_claims, standard_dispatcher
from runner.mcp_client.oauth.login import login
from tests.conftest import local_settings
from tests.mcp import unique
from tests.mcp.oauth_fake_server import fake_oauth_server

KEY = base64.urlsafe_b64encode(os.urandom(32)).decode()
MACHINE_SECRET = "machine-secret-6d0e3a1f"


async def _browse(url: str) -> None:
    async with httpx2.AsyncClient(follow_redirects=True, timeout=10) as client:
        (await client.get(url)).raise_for_status()


def _publish(conn: psycopg.Connection, manifest: dict[str, Any]) -> str:
    conn.execute("select publish_tool_version(%s, '[]')", (Jsonb(manifest),))
    return str(manifest["tool_id"])


async def test_tokens_never_reach_run_records_audit_rows_or_logs(
    database_url: str, conn: psycopg.Connection, tmp_path: Path, caplog: pytest.LogCaptureFixture
) -> None:
    caplog.set_level(logging.DEBUG)  # every logger, the SDK's auth flow and httpx2 included
    uid = str(uuid.uuid4())
    environ = {**os.environ, "KIWI_TOKEN_KEY": KEY, "MACHINE_SECRET": MACHINE_SECRET}
    made: list[str] = []
    with fake_oauth_server(access_ttl_s=2) as fake:
        fake.add_client("machine", MACHINE_SECRET)
        user_server = _publish(conn, _server(unique("tok_user"), fake.mcp_url, {"type": "oauth"}))
        machine_auth = {"type": "oauth", "grant": "client_credentials", "client_id": "machine"}
        machine_server = _publish(
            conn, _server(unique("tok_machine"), fake.mcp_url, {**machine_auth, "client_secret": "${MACHINE_SECRET}"})
        )
        made += [user_server, machine_server]
        for server in made:
            for name in ("whoami", "echo"):
                _publish(
                    conn,
                    {"tool_id": f"{server}.{name}", "tool_type": "mcp_tool", "executor": server, "version": "1.0.0"},
                )
        registry = PostgresRegistry(database_url, principal=from_claims({"sub": uid, "role": "authenticated"}))
        settings = local_settings(database_url, tmp_path)
        runner = Runner(registry, settings, dispatcher=standard_dispatcher(mcp_pool=McpPool()), environ=environ)
        try:
            said: list[str] = []
            visits: list[asyncio.Task[None]] = []

            def say(text: str) -> None:
                said.append(text)
                if m := re.search(r"^\s+(http\S+)$", text, re.M):
                    visits.append(asyncio.get_running_loop().create_task(_browse(m[1])))

            await login(registry, user_server, environ, say=say, open_browser=False, timeout_s=20)
            await asyncio.gather(*visits)
            results = [await runner.run(f"{user_server}.whoami", {})]
            time.sleep(2.2)  # expired: the next run refreshes
            results.append(await runner.run(f"{user_server}.echo", {"message": "after refresh"}))
            results.append(await runner.run(f"{machine_server}.whoami", {}))
            results.append(await runner.run(f"{user_server}.echo", {}))  # fails: no message
            await runner.flush_records()
        finally:
            await runner.aclose()
        assert [r.status for r in results] == ["success", "success", "success", "error"], [r.error for r in results]
        assert "refresh_token" in fake.log and "client_credentials" in fake.log
        secrets_ = [*fake.issued, MACHINE_SECRET]
    assert len(secrets_) >= 5

    runs = conn.execute("select row_to_json(t)::text from tool_runs t where caller = %s", (uid,)).fetchall()
    audit = conn.execute("select row_to_json(a)::text from audit_log a where a::text like %s", (f"%{uid}%",)).fetchall()
    stored = conn.execute(
        "select encode(tokens, 'escape') || encode(client_info, 'escape') from kiwi_internal.mcp_oauth_tokens"
        " where user_id = %s",
        (uid,),
    ).fetchall()
    assert len(runs) == 4 and stored, "the runs were recorded and the tokens stored"
    places = {
        "tool_runs": "\n".join(r[0] for r in runs),
        "audit_log": "\n".join(r[0] for r in audit),
        "the stored row": "\n".join(r[0] or "" for r in stored),
        "logs": "\n".join(f"{r.getMessage()} {r.exc_text or ''}" for r in caplog.records),
        "what was printed": "\n".join(said),
        "results": json.dumps([[r.output, r.error, r.detail] for r in results], default=str),
    }
    for where, text in places.items():
        for secret in secrets_:
            assert secret not in text, f"a token or secret is in {where}"
    conn.execute("delete from kiwi_internal.mcp_oauth_tokens where user_id = %s", (uid,))
    for server in made:
        conn.execute("delete from tools where executor_id = %s", (server,))
        conn.execute("delete from tools where ref = %s", (server,))


def _server(tool_id: str, url: str, auth: dict[str, Any]) -> dict[str, Any]:
    return {
        "tool_id": tool_id,
        "tool_type": "mcp_server",
        "executor": "http_client",
        "version": "1.0.0",
        "config": {"transport": "streamable_http", "url": url, "auth": auth},
    }
