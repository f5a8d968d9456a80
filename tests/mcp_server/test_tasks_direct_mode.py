"""Direct mode's tools as MCP tasks: each listed tool may run as one, and its queued run is
checked against the directive's execution context when a worker runs it, as a direct call is.
The SDK client in memory (2025-11-25), a real `kiwi worker` process, the real database."""

from __future__ import annotations

from pathlib import Path

import psycopg
import pytest
from mcp import Client
from mcp.shared.exceptions import MCPError
from mcp_types import INVALID_PARAMS

from runner import Runner
from tests.mcp_server.task_fleet import create_task, kiwi_worker, task_result
from tests.mcp_server.test_direct_mode import cleanup, context, direct, runner  # noqa: F401  (fixtures)

pytestmark = pytest.mark.slow  # real kiwi worker (and kiwi serve) processes


async def test_a_direct_tool_runs_as_a_task_in_the_directives_context(
    runner: Runner,  # noqa: F811
    context: dict[str, str],  # noqa: F811
    cleanup: list[str],  # noqa: F811
    conn: psycopg.Connection,
    database_url: str,
    tmp_path: Path,
) -> None:
    server = await direct(runner, context["directive"], cleanup)
    read = context["read"]
    with kiwi_worker(database_url, tmp_path / "worker"):
        async with Client(server, mode="legacy") as client:
            listed = {t.name: t.execution for t in (await client.list_tools()).tools}
            assert {name: e.task_support if e else None for name, e in listed.items()} == {
                context["greet"]: "optional",
                read: "optional",
            }

            allowed = await create_task(client, {"path": "docs/intro.md"}, name=read)
            answer = await task_result(client, allowed.task.task_id)
            assert not answer.is_error and answer.structured_content is not None
            assert answer.structured_content["output"] == {"read": "docs/intro.md"}

            outside = await create_task(client, {"path": "/etc/passwd"}, name=read)  # queued: checked when it runs
            refused = await task_result(client, outside.task.task_id)
            assert refused.is_error and refused.structured_content is not None
            assert refused.structured_content["error"]["kind"] == "permission_denied"
            assert "fs_read" in refused.structured_content["error"]["message"]

            with pytest.raises(MCPError) as missing:  # arguments its schema refuses: no task at all
                await create_task(client, {}, name=context["greet"])
            assert missing.value.code == INVALID_PARAMS and "name" in missing.value.message

    contexts = conn.execute(
        "select distinct context_id from queued_runs where id = any(%s::uuid[])",
        ([allowed.task.task_id, outside.task.task_id],),
    ).fetchall()
    assert len(contexts) == 1 and contexts[0][0] is not None  # the session's context, once
