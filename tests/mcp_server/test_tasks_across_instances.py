"""Two `kiwi serve` instances on two ports and one database: a task created through one is
polled, cancelled and read through the other, by the official SDK client. Tasks live in
Postgres (the run queue), so no instance holds one and any instance answers it; a `kiwi worker`
process runs them. Real processes, real HTTP, the real database; nothing is faked."""

from __future__ import annotations

import time
import uuid
from collections.abc import Callable, Iterator
from typing import Any

import psycopg
import pytest
from mcp.shared.exceptions import MCPError
from mcp_types import INVALID_PARAMS, LoggingMessageNotificationParams

from runner.testing.http_serving import Served, kiwi_http_server, user_token
from tests.mcp_server.task_fleet import (
    cancel_task,
    create_task,
    get_task,
    kiwi_worker,
    legacy_client,
    list_tasks,
    task_result,
    wait_for_status,
)

pytestmark = pytest.mark.slow  # real kiwi worker (and kiwi serve) processes

RELATED = "io.modelcontextprotocol/related-task"

SLEEPER = """\
echo "started" >&2
for i in $(seq 1 240); do echo "tick $i" >&2; sleep 0.25; done
echo '{"done": true}'
"""

TALKER = """\
sleep 1
echo "step one" >&2
sleep 1
echo "warning: step two" >&2
sleep 0.5
printf '{"text": "%s"}\\n' "${KIWI_PARAM_TEXT^^}"
"""


@pytest.fixture(scope="module")
def instances(database_url: str, tmp_path_factory: pytest.TempPathFactory) -> Iterator[tuple[Served, Served]]:
    """Two servers on one database, and a worker beside them."""
    work = tmp_path_factory.mktemp("tasks")
    with (
        kiwi_http_server(database_url, work / "a") as a,
        kiwi_http_server(database_url, work / "b") as b,
        kiwi_worker(database_url, work / "worker", "--concurrency", "2"),
    ):
        assert a.url != b.url
        yield a, b


def script(publish_tool: Callable[..., str], stem: str, text: str, parameters: list[dict[str, Any]]) -> str:
    return publish_tool(
        stem,
        {"tool_type": "script", "executor": "bash_runtime", "parameters": parameters, "config": {"timeout": 120}},
        {"run.sh": text},
        entrypoint="run.sh",
    )


def run_status(conn: psycopg.Connection, task_id: str, wanted: str, timeout_s: float = 30) -> dict[str, Any]:
    """The queued run behind the task, once it has status `wanted` (read as an admin)."""
    deadline = time.monotonic() + timeout_s
    while True:
        row = conn.execute("select status, error from queued_runs where id = %s", (task_id,)).fetchone()
        assert row is not None
        if row[0] == wanted:
            return {"status": row[0], "error": row[1]}
        assert time.monotonic() < deadline, f"the run behind task {task_id} is still {row[0]}"
        time.sleep(0.1)


async def test_a_task_made_on_one_instance_is_polled_cancelled_and_read_on_the_other(
    instances: tuple[Served, Served], publish_tool: Callable[..., str], conn: psycopg.Connection
) -> None:
    a, b = instances
    tool = script(publish_tool, "task_sleeper", SLEEPER, [])
    token = user_token()
    async with legacy_client(a.url, token) as on_a, legacy_client(b.url, token) as on_b:
        tasks = on_a.server_capabilities.tasks
        assert tasks is not None and tasks.requests is not None and tasks.requests.tools is not None
        assert tasks.cancel is not None and tasks.list is not None

        created = await create_task(on_a, {"action": "run", "item_id": tool}, ttl_ms=300_000)
        task_id = created.task.task_id
        assert created.task.status == "working" and created.task.ttl == 300_000
        assert uuid.UUID(task_id)

        # polled on b until the worker runs it: its latest line is b's status message
        deadline = time.monotonic() + 60
        polled = await get_task(on_b, task_id)
        while "tick" not in (polled.status_message or ""):
            assert time.monotonic() < deadline, polled
            polled = await get_task(on_b, task_id)
        assert polled.status == "working" and polled.created_at == created.task.created_at

        cancelled = await cancel_task(on_b, task_id)
        assert cancelled.task_id == task_id and cancelled.status == "cancelled"

        # the worker holding it (on neither instance) stopped its processes and ended the run
        ended = run_status(conn, task_id, "cancelled")
        assert "cancelled while it ran" in str(ended["error"])
        assert (await get_task(on_b, task_id)).status == "cancelled"
        assert (await get_task(on_a, task_id)).status == "cancelled"

        answer = await task_result(on_b, task_id)
        assert answer.is_error and answer.structured_content is not None
        assert answer.structured_content["error"]["kind"] == "cancelled"
        assert answer.meta is not None and answer.meta[RELATED] == {"taskId": task_id}

        with pytest.raises(MCPError) as again:  # a terminal task cannot be cancelled
            await cancel_task(on_a, task_id)
        assert again.value.code == INVALID_PARAMS and "already cancelled" in again.value.message


async def test_a_task_that_completes_is_answered_on_the_other_instance_with_its_lines_on_the_way(
    instances: tuple[Served, Served], publish_tool: Callable[..., str]
) -> None:
    a, b = instances
    tool = script(publish_tool, "task_talker", TALKER, [{"name": "text", "type": "string", "required": True}])
    heard: list[LoggingMessageNotificationParams] = []
    progress: list[tuple[float, str | None]] = []

    async def log(params: LoggingMessageNotificationParams) -> None:
        heard.append(params)

    async def moved(done: float, total: float | None, message: str | None) -> None:
        progress.append((done, message))

    token = user_token()
    async with legacy_client(a.url, token) as on_a, legacy_client(b.url, token, logging_callback=log) as on_b:
        created = await create_task(on_a, {"action": "run", "item_id": tool, "parameters": {"text": "quiet"}})
        task_id = created.task.task_id

        answer = await task_result(on_b, task_id, progress=moved)  # blocks on b until the run on the worker ends

        assert not answer.is_error, answer.content
        assert answer.structured_content is not None
        assert answer.structured_content["output"] == {"text": "QUIET"}
        assert answer.structured_content["status"] == "success"
        assert answer.meta is not None and answer.meta[RELATED] == {"taskId": task_id}

        lines = {p.data: p.level for p in heard}
        assert lines.get("step one") == "info" and lines.get("warning: step two") == "warning", heard
        assert all(p.meta and p.meta[RELATED] == {"taskId": task_id} for p in heard)
        said = [m for _, m in progress]
        assert "step one" in said and "warning: step two" in said, progress
        values = [d for d, _ in progress]
        assert values == sorted(values) and len(set(values)) == len(values)  # progress only goes up

        done = await get_task(on_a, task_id)
        assert done.status == "completed" and done.last_updated_at > done.created_at
        again = await task_result(on_a, task_id)  # terminal: answered at once, the same answer
        assert again.structured_content == answer.structured_content

        listed = await list_tasks(on_b)
        assert task_id in [t.task_id for t in listed.tasks]


async def test_another_users_task_is_not_found_on_any_instance(
    instances: tuple[Served, Served], publish_tool: Callable[..., str]
) -> None:
    a, b = instances
    tool = script(publish_tool, "task_private", "echo '{}'\n", [])
    stranger = user_token(str(uuid.uuid4()))
    async with legacy_client(a.url, user_token()) as owner, legacy_client(b.url, stranger) as other:
        created = await create_task(owner, {"action": "run", "item_id": tool})
        task_id = created.task.task_id
        await wait_for_status(owner, task_id, "completed")
        for ask in (get_task, task_result, cancel_task):
            with pytest.raises(MCPError) as refused:
                await ask(other, task_id)
            assert refused.value.code == INVALID_PARAMS and "not found" in refused.value.message
        assert task_id not in [t.task_id for t in (await list_tasks(other)).tasks]
