"""MCP tasks (protocol 2025-11-25), durable and instance-free: a task is a queued run.

    install_tasks(server, runner, registry, calls)   # build_server and direct mode do this

A `tools/call` that carries `task` ({ttl}) is answered at once with a CreateTaskResult: the
call is checked (the tool resolves for the caller, the arguments satisfy its schema), queued as
the caller (runner/fleet/queue.py, in the MCP session's name) and the queued run's id is the
task's id. A `kiwi worker` runs it through the same gate and sandbox as a direct call, under
the same execution context. Everything after that is read from Postgres, as the caller, under
row-level security, so any `kiwi serve` instance answers any task, with no session affinity:

    tasks/get      the task (task_view.py: status, statusMessage, createdAt, lastUpdatedAt, ttl, pollInterval)
    tasks/result   the CallToolResult the direct call would have given; blocks until the task is
                   terminal, forwarding what the run says as notifications (task_wait.py)
    tasks/list     the caller's tasks, newest first, with an opaque cursor
    tasks/cancel   cancels the run (its processes are killed wherever it runs); a terminal task is -32602

Task status: a run queued, running or retrying is `working`; one waiting for a person's
approval is `input_required` (approving it, from anywhere, puts it back on the queue by itself);
it ends `completed` (success), `failed` (error, timeout, every attempt failed) or `cancelled`.

Which tools run as tasks is the server's to say (`TaskCalls`): `execute` with action=run (the
meta-tools), every tool of direct mode; they are listed with `execution.taskSupport: optional`.
Any other tool asked to run as a task is -32601, as the specification asks. The capability is
declared, and `task` honoured, on connections that negotiated 2025-11-25, the protocol that
defines tasks; on any other the field is ignored, as the specification asks of a server that
did not declare it. The CreateTaskResult also carries `content` (the text of
`_meta["io.modelcontextprotocol/model-immediate-response"]`), so that a client that reads every
`tools/call` answer as a CallToolResult (the SDK's does) accepts it.

On 2026-07-28 tasks are the tasks extension's (task_ext.py), over the same queued runs: the
extension is declared in server/discover; a tools/call of a task tool from a client that declares
it in the request's capabilities is made a task by the server (no `task` field); tasks/get
inlines the result, tasks/update and tasks/cancel acknowledge, and tasks/result and tasks/list
do not exist there (-32601).
"""

from __future__ import annotations

import contextlib
import logging
from collections.abc import Iterator, Mapping
from dataclasses import dataclass
from typing import Any, Protocol

from mcp.server.context import CallNext, HandlerResult, ServerRequestContext
from mcp.server.mcpserver import MCPServer, require_client_extension
from mcp.shared.exceptions import MCPError
from mcp_types import (
    INTERNAL_ERROR,
    INVALID_PARAMS,
    METHOD_NOT_FOUND,
    CallToolRequestParams,
    CallToolResult,
    CancelTaskRequestParams,
    CancelTaskResult,
    CreateTaskResult,
    GetTaskPayloadRequestParams,
    GetTaskRequestParams,
    GetTaskResult,
    ListTasksResult,
    PaginatedRequestParams,
)
from pydantic import ValidationError

from ..core.params import validate_params
from ..core.plan import Plan
from ..errors import KiwiError, NotFound, UsageError
from ..fleet import QueuedRuns, task_status_of
from ..harness.run import Runner
from ..policy import Call
from ..registry.base import Registry
from .auth import acting_as_caller
from .task_ext import EXTENSION, EXTENSION_VERSIONS, UpdateTaskParams, created_task, detailed_task
from .task_view import TERMINAL_TASK, decode_cursor, encode_cursor, task_answer, task_of
from .task_wait import progress_token, wait_for_end

__all__ = ["IMMEDIATE_RESPONSE", "TASKS_CAPABILITY", "TASK_VERSIONS", "QueuedCall", "TaskCalls", "install_tasks"]

logger = logging.getLogger("kiwi.mcp.tasks")

TASK_VERSIONS = frozenset({"2025-11-25"})
"""The protocol versions that define tasks."""

TASKS_CAPABILITY: dict[str, Any] = {"list": {}, "cancel": {}, "requests": {"tools": {"call": {}}}}
IMMEDIATE_RESPONSE = "io.modelcontextprotocol/model-immediate-response"
PAGE = 50
MIN_KEEP_S, MAX_KEEP_S = 60.0, 30 * 86400.0
"""What a task's ttl may be (the queue's keep_s): from a minute to 30 days; a day by default."""


@dataclass(frozen=True)
class QueuedCall:
    """A tool call to queue: the tool, its arguments, and the session, context and approval it is
    made in."""

    ref: str
    version: str | None
    params: dict[str, Any]
    session: str
    context: str | None = None
    approval_id: str | None = None


class TaskCalls(Protocol):
    """What one kind of server runs as tasks, and how: the meta-tools' `execute run`
    (meta/task_calls.py), or direct mode's tools (direct.py)."""

    def task_tools(self) -> frozenset[str]:
        """The tools that may run as tasks (listed with execution.taskSupport optional)."""
        ...

    async def queued_call(
        self, name: str, arguments: dict[str, Any], request: ServerRequestContext[Any, Any]
    ) -> QueuedCall:
        """The call `name(arguments)` makes, to queue; MCPError when it cannot be a task."""
        ...

    def answer(self, result: CallToolResult, run: dict[str, Any]) -> CallToolResult:
        """A task's result as this server words it (direct mode rewrites hints)."""
        ...


def install_tasks(server: MCPServer, runner: Runner, registry: Registry, calls: TaskCalls) -> None:
    """Serve tasks on `server`: tasks/get, tasks/result, tasks/list and tasks/cancel, the `tasks`
    capability, task-augmented tools/call. Nothing when the registry cannot queue runs (the
    REST backend): then no capability is declared, and `task` is ignored."""
    if not QueuedRuns.supported(registry):
        return
    tasks = _Tasks(runner, QueuedRuns(registry), calls)
    low = server._lowlevel_server  # MCPServer has no public way to add a request handler (log_level.py)
    low.add_request_handler("tasks/get", GetTaskRequestParams, tasks.get_task)
    low.add_request_handler("tasks/result", GetTaskPayloadRequestParams, tasks.task_result)
    low.add_request_handler("tasks/list", PaginatedRequestParams, tasks.list_tasks)
    low.add_request_handler("tasks/cancel", CancelTaskRequestParams, tasks.cancel_task)
    low.add_request_handler("tasks/update", UpdateTaskParams, tasks.update_task)
    server.middleware.append(tasks.middleware)
    low.extensions[EXTENSION] = {}  # advertised in server/discover (2026-07-28) only
    call_tool = low.get_request_handler("tools/call")
    if call_tool is not None:  # at the handler layer, so the answer gets the 2026 envelope
        low.add_request_handler("tools/call", call_tool.params_type, tasks.extension_call(call_tool.handler))


@contextlib.contextmanager
def _as_protocol_errors(what: str) -> Iterator[None]:
    """A KiwiError as the JSON-RPC error the specification names: what the caller got wrong (an
    unknown or foreign task, a bad id, arguments a tool refuses) is -32602, anything else -32603
    (an unexpected error too, logged here and named on the wire only by its type)."""
    try:
        yield
    except MCPError:
        raise
    except (NotFound, UsageError) as e:
        raise MCPError(INVALID_PARAMS, f"{what}: {e.message}", data={"error": e.as_dict()}) from None
    except KiwiError as e:
        code = INVALID_PARAMS if e.exit_code == 4 else INTERNAL_ERROR  # refused: the request's; else the server's
        raise MCPError(code, f"{what}: {e.message}", data={"error": e.as_dict()}) from None
    except Exception as e:  # a bug: said as one, with no traceback on the wire
        logger.exception("%s: failed unexpectedly", what)
        raise MCPError(
            INTERNAL_ERROR, f"{what}: {type(e).__name__} in Kiwi's server (a bug, not your request)"
        ) from None


class _Tasks:
    def __init__(self, runner: Runner, queue: QueuedRuns, calls: TaskCalls) -> None:
        self.runner = runner
        self.queue = queue
        self.calls = calls

    # -- tools/call with `task`, and what initialize and tools/list say of it -------------------

    async def middleware(self, ctx: ServerRequestContext[Any, Any], call_next: CallNext) -> HandlerResult:
        if ctx.method == "tools/call" and ctx.protocol_version in TASK_VERSIONS:
            params = ctx.params if isinstance(ctx.params, Mapping) else {}
            if params.get("task") is not None:
                return await self.create(ctx, params)
        result = await call_next(ctx)
        if not isinstance(result, dict):
            return result
        if ctx.method == "initialize" and result.get("protocolVersion") in TASK_VERSIONS:
            capabilities = result.get("capabilities")
            if isinstance(capabilities, dict):
                result["capabilities"] = {**capabilities, "tasks": TASKS_CAPABILITY}
        elif ctx.method == "tools/list" and ctx.protocol_version in TASK_VERSIONS:
            names = self.calls.task_tools()
            listed = result.get("tools")
            if isinstance(listed, list):
                result["tools"] = [_optional_task(t) if t.get("name") in names else t for t in listed]
        return result

    async def create(self, ctx: ServerRequestContext[Any, Any], raw: Mapping[str, Any]) -> dict[str, Any]:
        """A task-augmented tools/call: checked, queued as the caller, answered with its task."""
        try:
            params = CallToolRequestParams.model_validate(dict(raw), by_name=False)
        except ValidationError as e:
            fields = sorted({".".join(str(p) for p in err["loc"]) for err in e.errors()})
            raise MCPError(INVALID_PARAMS, f"invalid tools/call params: {', '.join(fields)}") from None
        ttl = params.task.ttl if params.task is not None else None
        keep_s = None if ttl is None else min(max(ttl / 1000, MIN_KEEP_S), MAX_KEEP_S)
        token = progress_token(ctx)
        with _as_protocol_errors(f"{params.name} cannot run as a task"), acting_as_caller():
            call = await self.calls.queued_call(params.name, dict(params.arguments or {}), ctx)
            plan = await self._checked(call)
            run = await self.queue.enqueue(
                plan.tool_id,
                call.params,
                version=plan.version,
                session_id=call.session,
                keep_s=keep_s,
                context=call.context,
                approval_id=call.approval_id,
                progress_token=token,
            )
        task = task_of(run)
        text = (
            f"{plan.tool_id}@{plan.version} runs as task {task.task_id} ({task.status}): poll it with tasks/get "
            "and read its answer with tasks/result"
        )
        created = CreateTaskResult(task=task, _meta={IMMEDIATE_RESPONSE: text})
        answer = created.model_dump(by_alias=True, mode="json", exclude_none=True)
        answer["content"] = [{"type": "text", "text": text}]
        return answer

    async def _checked(self, call: QueuedCall) -> Plan:
        """What can be known before a worker takes the call: the tool resolves for the caller and
        the arguments satisfy its schema. A refusal is audited, as a direct call's would be;
        permissions, rate limits and approvals are the gate's when the run starts."""
        plan: Plan | None = None
        try:
            plan = await self.runner.plan(call.ref, call.version or self.runner.locked_version(call.ref))
            _check(plan, call)
        except KiwiError as e:
            asked = Call(call.session, context=call.context, approval_id=call.approval_id)
            self.runner.gate.refused(asked, plan, call.ref, call.params, False, e)
            raise
        return plan

    # -- 2026-07-28: the tasks extension (task_ext.py) ------------------------------------------

    def extension_call(self, call_tool: Any) -> Any:
        """The tools/call handler that makes a task of a call the server can queue, when the
        client declared the extension in this request; every other call is answered directly."""

        async def handler(ctx: ServerRequestContext[Any, Any], params: CallToolRequestParams) -> HandlerResult:
            if (
                ctx.protocol_version in EXTENSION_VERSIONS
                and params.name in self.calls.task_tools()
                and _declares_extension(ctx)
            ):
                created = await self._extension_task(ctx, params)
                if created is not None:
                    return created
            return await call_tool(ctx, params)

        return handler

    async def _extension_task(
        self, ctx: ServerRequestContext[Any, Any], params: CallToolRequestParams
    ) -> dict[str, Any] | None:
        """The call queued as the caller and answered with its task; None when it cannot be a
        task (another action of execute, a local tool, arguments its schema refuses): then the
        direct call answers it, refusing it (and auditing that) as it always does."""
        with _as_protocol_errors(f"{params.name} could not be queued"), acting_as_caller():
            try:
                call = await self.calls.queued_call(params.name, dict(params.arguments or {}), ctx)
                plan = await self.runner.plan(call.ref, call.version or self.runner.locked_version(call.ref))
                _check(plan, call)
            except (MCPError, KiwiError):
                return None
            run = await self.queue.enqueue(
                plan.tool_id,
                call.params,
                version=plan.version,
                session_id=call.session,
                context=call.context,
                approval_id=call.approval_id,
            )
        return created_task(run)

    async def update_task(self, ctx: ServerRequestContext[Any, Any], params: UpdateTaskParams) -> dict[str, Any]:
        """tasks/update: Kiwi's tasks never ask the client for input, so every response is one the
        extension has the server ignore; the task must still be the caller's."""
        _extension_only(ctx, "tasks/update")
        with _as_protocol_errors("Failed to update task"), acting_as_caller():
            await self.queue.get(params.task_id, events=False)
        return {}

    # -- tasks/* -----------------------------------------------------------------------------

    async def get_task(self, ctx: ServerRequestContext[Any, Any], params: GetTaskRequestParams) -> HandlerResult:
        modern = _extension_request(ctx)
        with _as_protocol_errors("Failed to retrieve task"), acting_as_caller():
            run = await self.queue.get(params.task_id, events=False)
        if modern:
            return detailed_task(run, render=self.calls.answer)
        return GetTaskResult.model_validate(task_of(run).model_dump())

    async def task_result(
        self, ctx: ServerRequestContext[Any, Any], params: GetTaskPayloadRequestParams
    ) -> dict[str, Any]:
        _legacy_only(ctx, "tasks/result")
        with _as_protocol_errors("Failed to retrieve task result"), acting_as_caller():
            run = await self.queue.get(params.task_id, events=False)
            if task_status_of(run) not in TERMINAL_TASK:
                run = await wait_for_end(self.queue, run, ctx)
        answer = task_answer(run, render=self.calls.answer)
        return answer.model_dump(by_alias=True, mode="json", exclude_none=True, exclude={"result_type"})

    async def list_tasks(self, ctx: ServerRequestContext[Any, Any], params: PaginatedRequestParams) -> ListTasksResult:
        _legacy_only(ctx, "tasks/list")
        before = decode_cursor(params.cursor)
        with _as_protocol_errors("Failed to list tasks"), acting_as_caller():
            rows = await self.queue.page(limit=PAGE, before=before)
        more = encode_cursor(rows[-1]) if len(rows) == PAGE else None
        return ListTasksResult(tasks=[task_of(r) for r in rows], next_cursor=more)

    async def cancel_task(self, ctx: ServerRequestContext[Any, Any], params: CancelTaskRequestParams) -> HandlerResult:
        modern = _extension_request(ctx)
        with _as_protocol_errors("Failed to cancel task"), acting_as_caller():
            run = await self.queue.get(params.task_id, events=False)
            status = task_status_of(run)
            if modern:  # an acknowledgement; one that ended already stays as it ended (the extension's rule)
                if status not in TERMINAL_TASK:
                    await self.queue.cancel(params.task_id)
                return {}
            if status in TERMINAL_TASK:
                raise MCPError(
                    INVALID_PARAMS,
                    f"Failed to cancel task: task {params.task_id} is already {status}",
                    data={"task": task_of(run).model_dump(by_alias=True, mode="json", exclude_none=True)},
                )
            run = await self.queue.cancel(params.task_id)
        return CancelTaskResult.model_validate(task_of(run).model_dump())


def _check(plan: Plan, call: QueuedCall) -> None:
    """What a worker needs of a call: a registry tool, and arguments its schema takes."""
    if plan.source != "registry":
        raise UsageError(
            f"{plan.tool_id} is a tool of a local space ({plan.source}): a worker runs registry tools only",
            hint="publish it (kiwi publish), or call it without `task`",
        )
    validate_params(plan.tool_id, plan.parameters, call.params)


def _declares_extension(ctx: ServerRequestContext[Any, Any]) -> bool:
    capabilities = ctx.session.client_capabilities
    return bool(capabilities and capabilities.extensions and EXTENSION in capabilities.extensions)


def _extension_request(ctx: ServerRequestContext[Any, Any]) -> bool:
    """Whether a tasks/* request is the extension's (2026-07-28), whose client must declare it (-32021)."""
    if ctx.protocol_version not in EXTENSION_VERSIONS:
        return False
    require_client_extension(ctx, EXTENSION)
    return True


def _extension_only(ctx: ServerRequestContext[Any, Any], method: str) -> None:
    if not _extension_request(ctx):
        raise MCPError(METHOD_NOT_FOUND, f"{method} is the tasks extension's (protocol 2026-07-28)", data=method)


def _legacy_only(ctx: ServerRequestContext[Any, Any], method: str) -> None:
    if ctx.protocol_version in EXTENSION_VERSIONS:
        raise MCPError(
            METHOD_NOT_FOUND,
            f"{method} is not in the tasks extension of 2026-07-28: tasks/get answers the task with its result",
            data=method,
        )


def _optional_task(tool: dict[str, Any]) -> dict[str, Any]:
    return {**tool, "execution": {**(tool.get("execution") or {}), "taskSupport": "optional"}}
