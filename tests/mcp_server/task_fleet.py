"""What the MCP task tests share: a real `kiwi worker` process beside the `kiwi serve` ones
(runner/testing/http_serving.py), the official SDK client on the protocol that defines tasks
(2025-11-25, the initialize handshake), and each task request sent with the SDK's own typed
requests, as the SDK has no helper for them."""

from __future__ import annotations

import contextlib
import subprocess
import time
from collections.abc import AsyncIterator, Iterator
from pathlib import Path
from typing import Any

import anyio
import httpx2
from mcp import Client
from mcp.client.session import LoggingFnT
from mcp.client.streamable_http import streamable_http_client
from mcp.shared.dispatcher import ProgressFnT
from mcp_types import (
    CallToolRequest,
    CallToolRequestParams,
    CallToolResult,
    CancelTaskRequest,
    CancelTaskRequestParams,
    CancelTaskResult,
    CreateTaskResult,
    GetTaskPayloadRequest,
    GetTaskPayloadRequestParams,
    GetTaskRequest,
    GetTaskRequestParams,
    GetTaskResult,
    ListTasksRequest,
    ListTasksResult,
    PaginatedRequestParams,
    TaskMetadata,
)

from tests.fleet.workers import start_worker, stop, wait_until


@contextlib.contextmanager
def kiwi_worker(
    database_url: str, workdir: Path, *args: str, env: dict[str, str] | None = None
) -> Iterator[subprocess.Popen[bytes]]:
    """`kiwi worker` as a real process on the test database (tests/fleet/workers.py), once it
    says it takes runs, with `env` added (OTEL_*, say); always stopped (SIGTERM: it lets its runs end)."""
    workdir.mkdir(parents=True, exist_ok=True)
    log = workdir / "worker.log"
    proc = start_worker(database_url, workdir / "cache", "--poll", "1", *args, log=log, env=env)

    def said() -> str:
        return log.read_text(errors="replace") if log.exists() else ""

    try:
        wait_until(lambda: "taking queued runs" in said() or proc.poll() is not None, timeout=60, what="a worker")
        assert proc.poll() is None, f"kiwi worker did not start:\n{said()}"
        yield proc
    finally:
        stop(proc)


@contextlib.asynccontextmanager
async def legacy_client(url: str, token: str, *, logging_callback: LoggingFnT | None = None) -> AsyncIterator[Client]:
    """The official SDK client over streamable HTTP with the initialize handshake (2025-11-25,
    where tasks are defined), sending `Authorization: Bearer <token>`."""
    headers = {"Authorization": f"Bearer {token}"}
    timeout = httpx2.Timeout(30, read=120)
    async with (
        httpx2.AsyncClient(headers=headers, timeout=timeout) as http,
        Client(streamable_http_client(url, http_client=http), mode="legacy", logging_callback=logging_callback) as c,
    ):
        yield c


async def create_task(
    client: Client,
    arguments: dict[str, Any],
    *,
    name: str = "execute",
    ttl_ms: int | None = 600_000,
    meta: dict[str, Any] | None = None,
) -> CreateTaskResult:
    """tools/call augmented with a task: the answer is the task, at once. `meta`: the request's
    `_meta` (a traceparent, say)."""
    params = CallToolRequestParams(name=name, arguments=arguments, task=TaskMetadata(ttl=ttl_ms), _meta=meta)
    return await client.session.send_request(CallToolRequest(params=params), CreateTaskResult)


async def get_task(client: Client, task_id: str) -> GetTaskResult:
    request = GetTaskRequest(params=GetTaskRequestParams(task_id=task_id))
    return await client.session.send_request(request, GetTaskResult)


async def task_result(client: Client, task_id: str, *, progress: ProgressFnT | None = None) -> CallToolResult:
    """tasks/result: blocks until the task is terminal; the tool answer (a CallToolResult)."""
    request = GetTaskPayloadRequest(params=GetTaskPayloadRequestParams(task_id=task_id))
    return await client.session.send_request(request, CallToolResult, progress_callback=progress)


async def cancel_task(client: Client, task_id: str) -> CancelTaskResult:
    request = CancelTaskRequest(params=CancelTaskRequestParams(task_id=task_id))
    return await client.session.send_request(request, CancelTaskResult)


async def list_tasks(client: Client, cursor: str | None = None) -> ListTasksResult:
    request = ListTasksRequest(params=PaginatedRequestParams(cursor=cursor))
    return await client.session.send_request(request, ListTasksResult)


async def wait_for_status(client: Client, task_id: str, wanted: str, *, timeout_s: float = 60) -> GetTaskResult:
    """Poll tasks/get until the task has status `wanted` (an AssertionError naming the last one)."""
    deadline = time.monotonic() + timeout_s
    while True:
        task = await get_task(client, task_id)
        if task.status == wanted:
            return task
        if time.monotonic() > deadline:
            raise AssertionError(f"task {task_id} is still {task.status} ({task.status_message}), not {wanted}")
        await anyio.sleep(0.2)
