"""The kernel socket (runner/handlers/kernel.py): a script tool that asks for it (config.kernel)
calls other tools while it runs, through $KIWI_KERNEL, in its own session and its caller's
context, through the same gate; a call the context does not allow is refused.

Real processes in the real sandbox, the real database, Kiwi's MCP server as the entry point.
"""

from __future__ import annotations

import uuid
from collections.abc import AsyncIterator, Callable, Iterator
from contextlib import asynccontextmanager
from pathlib import Path
from typing import Any

import psycopg
import pytest
from mcp import Client

from runner import PostgresRegistry, Runner, build_server, local_owner, standard_dispatcher
from tests.conftest import local_settings

CALLER = """#!/usr/bin/env bash
# Calls each tool named in $KIWI_PARAM_TOOLS through the kernel socket; prints the answers.
set -euo pipefail
printf '{"socket": "%s"' "$KIWI_KERNEL"
sep=', '
for tool in $KIWI_PARAM_TOOLS; do
  case "$tool" in
    format_bytes) params='{"bytes": 2048}' ;;
    *) params='{"name": "kernel"}' ;;
  esac
  answer=$(curl -sS --unix-socket "$KIWI_KERNEL" -H 'Content-Type: application/json' \\
    --data "{\\"item_id\\": \\"$tool\\", \\"parameters\\": $params}" http://kiwi/execute)
  printf '%s"%s": %s' "$sep" "$tool" "$answer"
  sep=', '
done
printf '}\\n'
"""


@pytest.fixture
def session(conn: psycopg.Connection) -> Iterator[str]:
    sid = f"test-kernel-{uuid.uuid4()}"
    yield sid
    conn.execute("delete from audit_log where session_id = %s", (sid,))
    conn.execute("delete from execution_contexts where session_id = %s", (sid,))


@asynccontextmanager
async def kiwi(database_url: str, cache_dir: Path, session: str) -> AsyncIterator[Client]:
    settings = local_settings(database_url, cache_dir)
    runner = Runner(PostgresRegistry(database_url, principal=local_owner()), settings, dispatcher=standard_dispatcher())
    try:
        async with Client(build_server(runner, session_id=session)) as client:
            yield client
    finally:
        await runner.aclose()


def caller_tool(publish_tool: Callable[..., str], kernel: Any = True) -> str:
    return publish_tool(
        "kernel_caller",
        {
            "tool_type": "script",
            "executor": "bash_runtime",
            "parameters": [{"name": "tools", "type": "string", "required": True}],
            "config": {"kernel": kernel, "timeout": 60},
        },
        {"call.sh": CALLER},
        entrypoint="call.sh",
    )


def audit(conn: psycopg.Connection, session: str) -> list[tuple[str, str, str | None]]:
    rows = conn.execute(
        "select tool_id, decision, reason from audit_log where session_id = %s order by at, id", (session,)
    ).fetchall()
    return [(r[0], r[1], r[2]) for r in rows]


async def test_a_bash_tool_calls_another_tool_through_the_kernel_socket_in_its_own_session(
    database_url: str, conn: psycopg.Connection, tmp_path: Path, publish_tool: Callable[..., str], session: str
) -> None:
    tool = caller_tool(publish_tool)
    async with kiwi(database_url, tmp_path, session) as client:
        ran = await client.call_tool(
            "execute", {"action": "run", "item_id": tool, "parameters": {"tools": "hello_world"}}
        )
    assert not ran.is_error, ran.content
    assert ran.structured_content["output"]["socket"] == "/run/kiwi/kernel.sock", "mounted into the sandbox"
    answer = ran.structured_content["output"]["hello_world"]
    assert answer["status"] == "success" and answer["is_error"] is False, answer["text"]
    assert "Hello, kernel!" in str(answer["output"])
    calls = audit(conn, session)
    assert [(t, d) for t, d, _ in calls] == [(tool, "allowed"), ("hello_world", "allowed")], (
        "the nested call is audited in the caller's session, through the same gate"
    )


async def test_a_nested_call_the_callers_context_does_not_allow_is_refused(
    database_url: str, conn: psycopg.Connection, tmp_path: Path, publish_tool: Callable[..., str], session: str
) -> None:
    """The agent's context allows the calling tool and hello_world: through the socket,
    hello_world runs and format_bytes is refused, as it would be to the agent itself."""
    tool = caller_tool(publish_tool)
    async with kiwi(database_url, tmp_path, session) as client:
        opened = await client.call_tool(
            "execute", {"action": "open_context", "permissions": {"tools": [tool, "hello_world"]}}
        )
        context = opened.structured_content["context"]["id"]
        ran = await client.call_tool(
            "execute",
            {"action": "run", "item_id": tool, "context": context, "parameters": {"tools": "hello_world format_bytes"}},
        )
    assert not ran.is_error, ran.content
    out = ran.structured_content["output"]
    assert out["hello_world"]["status"] == "success"
    refused = out["format_bytes"]
    assert refused["is_error"] is True and refused["error"]["kind"] == "permission_denied"
    assert "tools: format_bytes is not allowed" in refused["error"]["message"]
    assert ("format_bytes", "refused") in [(t, d) for t, d, _ in audit(conn, session)]


async def test_a_tools_own_kernel_permissions_narrow_its_calls(
    database_url: str, conn: psycopg.Connection, tmp_path: Path, publish_tool: Callable[..., str], session: str
) -> None:
    """Run with no context at all (everything allowed), a tool that declares kernel permissions
    of hello_world only still cannot call format_bytes."""
    tool = caller_tool(publish_tool, {"permissions": {"tools": ["hello_world"]}})
    async with kiwi(database_url, tmp_path, session) as client:
        ran = await client.call_tool(
            "execute", {"action": "run", "item_id": tool, "parameters": {"tools": "format_bytes hello_world"}}
        )
    out = ran.structured_content["output"]
    assert out["format_bytes"]["error"]["kind"] == "permission_denied"
    assert out["hello_world"]["status"] == "success"


RECURSIVE = """#!/usr/bin/env bash
# Calls itself through the kernel socket, and prints what the inner call answered.
set -euo pipefail
inner=$(curl -sS --unix-socket "$KIWI_KERNEL" --data "{\\"item_id\\": \\"$KIWI_TOOL_ID\\"}" http://kiwi/execute)
printf '{"inner": %s}\\n' "$inner"
"""


async def test_a_tool_that_calls_itself_through_the_kernel_stops_at_the_nesting_limit(
    database_url: str, tmp_path: Path, publish_tool: Callable[..., str], session: str
) -> None:
    tool = publish_tool(
        "kernel_recursive",
        {"tool_type": "script", "executor": "bash_runtime", "config": {"kernel": True, "timeout": 120}},
        {"again.sh": RECURSIVE},
        entrypoint="again.sh",
    )
    async with kiwi(database_url, tmp_path, session) as client:
        ran = await client.call_tool("execute", {"action": "run", "item_id": tool})
    assert not ran.is_error, ran.content
    answer, levels = ran.structured_content, 0
    while isinstance(answer.get("output"), dict) and "inner" in answer["output"]:
        answer, levels = answer["output"]["inner"], levels + 1
    assert answer["error"]["kind"] == "nested_too_deep", answer
    assert levels == 9, "the run itself and eight nested runs, each started from the one before, and no more"
