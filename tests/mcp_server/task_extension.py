"""The client half of the tasks extension (`io.modelcontextprotocol/tasks`, protocol
2026-07-28) for the tests, on the official SDK's extension surface: the SDK ships the
mechanism (a `ClientExtension` claims the `resultType: "task"` shape of a tools/call answer, its
resolver finishes it; extension requests go through `session.send_request`, the task id riding
the `Mcp-Name` header) but no tasks extension of its own. This is the smallest one the extension's
text allows: it declares the extension on every request, and a claimed task is polled with
tasks/get, at the interval the server asks for, until it ends.

    async with Client(url_or_server, mode="2026-07-28", extensions=[Tasks()]) as client:
        answer = await client.call_tool("execute", {...})          # a task, polled to its end
        created = await client.session.call_tool("execute", {...}, allow_claimed=True)  # the task itself
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any, Literal

import anyio
from mcp import Client
from mcp.client import ClaimContext, ClientExtension, ResultClaim
from mcp.client.session import ClientSession
from mcp.shared.exceptions import MCPError
from mcp_types import CallToolResult, EmptyResult, ErrorData, Request, RequestParams, Result

EXTENSION = "io.modelcontextprotocol/tasks"
TERMINAL = ("completed", "failed", "cancelled")


class CreatedTask(Result):
    """A tools/call answered with a task (CreateTaskResult: flat, `resultType: "task"`)."""

    result_type: Literal["task"] = "task"
    task_id: str
    status: str
    status_message: str | None = None
    created_at: str
    last_updated_at: str
    ttl_ms: int | None = None
    poll_interval_ms: int | None = None


class DetailedTask(Result):
    """What tasks/get answers: the task, with its result or error once it ended."""

    result_type: str | None = None
    task_id: str
    status: str
    status_message: str | None = None
    created_at: str
    last_updated_at: str
    ttl_ms: int | None = None
    poll_interval_ms: int | None = None
    result: dict[str, Any] | None = None
    error: dict[str, Any] | None = None
    input_requests: dict[str, Any] | None = None


class TaskParams(RequestParams):
    task_id: str


class UpdateParams(TaskParams):
    input_responses: dict[str, Any]


class GetTask(Request[TaskParams, Literal["tasks/get"]]):
    method: Literal["tasks/get"] = "tasks/get"
    params: TaskParams
    name_param = "taskId"


class UpdateTask(Request[UpdateParams, Literal["tasks/update"]]):
    method: Literal["tasks/update"] = "tasks/update"
    params: UpdateParams
    name_param = "taskId"


class CancelTask(Request[TaskParams, Literal["tasks/cancel"]]):
    method: Literal["tasks/cancel"] = "tasks/cancel"
    params: TaskParams
    name_param = "taskId"


class Tasks(ClientExtension):
    """Declares the extension; finishes a claimed task by polling it. `created` keeps each task
    it was answered with, so a test can see that a call became one."""

    identifier = EXTENSION

    def __init__(self, *, timeout_s: float = 120) -> None:
        self.created: list[CreatedTask] = []
        self.timeout_s = timeout_s

    def claims(self) -> Sequence[ResultClaim[Any]]:
        return [ResultClaim(result_type="task", model=CreatedTask, resolve=self._finish)]

    async def _finish(self, task: CreatedTask, ctx: ClaimContext) -> CallToolResult:
        self.created.append(task)
        with anyio.fail_after(self.timeout_s):
            polled = await get_task(ctx.session, task.task_id)
            while polled.status not in TERMINAL:
                await anyio.sleep(min((polled.poll_interval_ms or 1000) / 1000, 1.0))
                polled = await get_task(ctx.session, task.task_id)
        if polled.status == "completed" and polled.result is not None:
            return CallToolResult.model_validate(polled.result)
        if polled.status == "failed" and polled.error is not None:
            raise MCPError.from_error_data(ErrorData.model_validate(polled.error))
        return CallToolResult(content=[], is_error=True, structured_content={"task": polled.model_dump()})


def _session(client: Client | ClientSession) -> ClientSession:
    return client.session if isinstance(client, Client) else client


async def create_task(client: Client, name: str, arguments: dict[str, Any]) -> CreatedTask:
    """A tools/call whose answer must be a task (an AssertionError says what it was instead)."""
    answer = await client.session.call_tool(name, arguments, allow_claimed=True)
    assert isinstance(answer, CreatedTask), answer
    return answer


async def get_task(client: Client | ClientSession, task_id: str) -> DetailedTask:
    return await _session(client).send_request(GetTask(params=TaskParams(task_id=task_id)), DetailedTask)


async def update_task(client: Client | ClientSession, task_id: str, responses: dict[str, Any]) -> EmptyResult:
    request = UpdateTask(params=UpdateParams(task_id=task_id, input_responses=responses))
    return await _session(client).send_request(request, EmptyResult)


async def cancel_task(client: Client | ClientSession, task_id: str) -> EmptyResult:
    return await _session(client).send_request(CancelTask(params=TaskParams(task_id=task_id)), EmptyResult)


async def wait_for(client: Client, task_id: str, wanted: str, *, timeout_s: float = 60) -> DetailedTask:
    """Poll tasks/get until the task has status `wanted`."""
    with anyio.fail_after(timeout_s):
        while (task := await get_task(client, task_id)).status != wanted:
            assert task.status not in TERMINAL, f"task {task_id} ended {task.status}, not {wanted}: {task}"
            await anyio.sleep(0.2)
    return task
