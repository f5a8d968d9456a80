"""The tasks extension of 2026-07-28 on real processes: two `kiwi serve` instances on one
database and a `kiwi worker`, the official SDK client speaking 2026-07-28 over streamable HTTP
(and over stdio) with the extension declared. A task made through one instance is polled,
cancelled and read through the other; a call the server made a task of resolves, through
polling, into the tool's answer."""

from __future__ import annotations

import contextlib
import sys
import time
import uuid
from collections.abc import AsyncIterator, Callable, Iterator
from pathlib import Path
from typing import Any

import httpx2
import psycopg
import pytest
from mcp import Client
from mcp.client.stdio import StdioServerParameters
from mcp.client.streamable_http import streamable_http_client

from runner.testing.http_serving import Served, kiwi_http_server, serve_env, user_token
from tests.mcp_server.task_extension import Tasks, cancel_task, create_task, get_task, wait_for
from tests.mcp_server.task_fleet import kiwi_worker

pytestmark = pytest.mark.slow  # real kiwi worker and kiwi serve processes

ROOT = Path(__file__).resolve().parents[2]
SLEEPER = 'echo "started" >&2\nfor i in $(seq 1 240); do echo "tick $i" >&2; sleep 0.25; done\necho \'{}\'\n'
SHOUTER = 'sleep 1\necho "shouting" >&2\nprintf \'{"text": "%s"}\\n\' "${KIWI_PARAM_TEXT^^}"\n'


@pytest.fixture(scope="module")
def instances(database_url: str, tmp_path_factory: pytest.TempPathFactory) -> Iterator[tuple[Served, Served]]:
    work = tmp_path_factory.mktemp("ext_tasks")
    with (
        kiwi_http_server(database_url, work / "a") as a,
        kiwi_http_server(database_url, work / "b") as b,
        kiwi_worker(database_url, work / "worker", "--concurrency", "2"),
    ):
        yield a, b


@contextlib.asynccontextmanager
async def modern_client(url: str, token: str, tasks: Tasks | None = None) -> AsyncIterator[Client]:
    """The SDK client on 2026-07-28 (no handshake, no session) with the tasks extension declared."""
    async with (
        httpx2.AsyncClient(headers={"Authorization": f"Bearer {token}"}, timeout=httpx2.Timeout(30, read=120)) as http,
        Client(
            streamable_http_client(url, http_client=http), mode="auto", extensions=[tasks if tasks else Tasks()]
        ) as client,
    ):
        assert client.session.protocol_version == "2026-07-28"
        yield client


def script(publish_tool: Callable[..., str], stem: str, text: str, parameters: list[dict[str, Any]]) -> str:
    return publish_tool(
        stem,
        {"tool_type": "script", "executor": "bash_runtime", "parameters": parameters, "config": {"timeout": 120}},
        {"run.sh": text},
        entrypoint="run.sh",
    )


def run_row(conn: psycopg.Connection, task_id: str, wanted: str, timeout_s: float = 30) -> tuple[str, str | None]:
    deadline = time.monotonic() + timeout_s
    while True:
        row = conn.execute("select status, error from queued_runs where id = %s", (task_id,)).fetchone()
        assert row is not None
        if row[0] == wanted:
            return row[0], row[1]
        assert time.monotonic() < deadline, f"the run behind task {task_id} is still {row[0]}"
        time.sleep(0.1)


async def test_a_task_made_on_one_instance_is_polled_and_cancelled_on_the_other(
    instances: tuple[Served, Served], publish_tool: Callable[..., str], conn: psycopg.Connection
) -> None:
    a, b = instances
    tool = script(publish_tool, "ext_task_sleeper", SLEEPER, [])
    token = user_token()
    async with modern_client(a.url, token) as on_a, modern_client(b.url, token) as on_b:
        assert "io.modelcontextprotocol/tasks" in (on_a.server_capabilities.extensions or {})
        created = await create_task(on_a, "execute", {"action": "run", "item_id": tool})
        assert created.status == "working" and uuid.UUID(created.task_id)

        deadline = time.monotonic() + 60
        polled = await get_task(on_b, created.task_id)
        while "tick" not in (polled.status_message or ""):  # the worker runs it; b reads what it said last
            assert time.monotonic() < deadline, polled
            polled = await get_task(on_b, created.task_id)
        assert polled.status == "working" and polled.created_at == created.created_at

        await cancel_task(on_b, created.task_id)
        _, error = run_row(conn, created.task_id, "cancelled")  # the worker (on neither) killed it
        assert "cancelled while it ran" in str(error)
        ended = await get_task(on_a, created.task_id)
        assert ended.status == "cancelled" and ended.result is None


async def test_a_call_made_a_task_resolves_into_the_tools_answer_across_instances(
    instances: tuple[Served, Served], publish_tool: Callable[..., str]
) -> None:
    a, b = instances
    tool = script(publish_tool, "ext_task_shouter", SHOUTER, [{"name": "text", "type": "string", "required": True}])
    tasks = Tasks()
    token = user_token()
    async with modern_client(a.url, token, tasks) as on_a, modern_client(b.url, token) as on_b:
        started = time.monotonic()
        answer = await on_a.call_tool("execute", {"action": "run", "item_id": tool, "parameters": {"text": "quiet"}})
        took = time.monotonic() - started
        assert len(tasks.created) == 1  # the server made a task of it; the extension polled it to its end
        assert not answer.is_error and answer.structured_content is not None
        assert answer.structured_content["output"] == {"text": "QUIET"}
        task_id = tasks.created[0].task_id
        done = await get_task(on_b, task_id)
        assert done.status == "completed" and done.result is not None
        assert done.result["structuredContent"]["output"] == {"text": "QUIET"}
        failing = script(publish_tool, "ext_task_failing", "echo 'no' >&2\nexit 3\n", [])
        created = await create_task(on_b, "execute", {"action": "run", "item_id": failing})
        failed = await wait_for(on_a, created.task_id, "completed")  # a tool error is a result, not `failed`
        assert failed.result is not None and failed.result["isError"] is True
    print(f"\n2026-07-28 task through a worker, created to answered: {took * 1000:.0f} ms (the tool sleeps 1 s)")


async def test_another_users_task_is_not_found_on_either_instance(
    instances: tuple[Served, Served], publish_tool: Callable[..., str]
) -> None:
    a, b = instances
    tool = script(publish_tool, "ext_task_private", "echo '{}'\n", [])
    stranger = user_token(str(uuid.uuid4()))
    async with modern_client(a.url, user_token()) as owner, modern_client(b.url, stranger) as other:
        created = await create_task(owner, "execute", {"action": "run", "item_id": tool})
        await wait_for(owner, created.task_id, "completed")
        for ask in (get_task, cancel_task):
            with pytest.raises(Exception) as refused:
                await ask(other, created.task_id)
            assert "not found" in str(refused.value)


async def test_over_stdio(database_url: str, tmp_path: Path, publish_tool: Callable[..., str]) -> None:
    tool = script(publish_tool, "ext_task_stdio", SHOUTER, [{"name": "text", "type": "string", "required": True}])
    params = StdioServerParameters(
        command=sys.executable,
        args=["-m", "runner.cli.serve", "--transport", "stdio"],
        env=serve_env(database_url, tmp_path / "cache"),
        cwd=str(ROOT),
    )
    tasks = Tasks()
    with kiwi_worker(database_url, tmp_path / "worker"):
        async with Client(params, mode="auto", extensions=[tasks]) as client:
            assert client.session.protocol_version == "2026-07-28"
            answer = await client.call_tool("execute", {"action": "run", "item_id": tool, "parameters": {"text": "io"}})
    assert len(tasks.created) == 1
    assert not answer.is_error and answer.structured_content is not None
    assert answer.structured_content["output"] == {"text": "IO"}
