"""What the meta-tools run as MCP tasks (runner/mcp_server/tasks.py): `execute` with
action=run, its arguments read as `execute run` reads them. Every other action answers at once
and is not a task (-32602 naming action=run); search, load and help are never tasks (-32601)."""

from __future__ import annotations

from typing import Any

from mcp.server.context import ServerRequestContext
from mcp.shared.exceptions import MCPError
from mcp_types import INVALID_PARAMS, METHOD_NOT_FOUND, CallToolResult

from ..tasks import QueuedCall
from .args import check_context_id, split_ref
from .state import ServerState, session_of_request

__all__ = ["ExecuteTasks"]

_TASK_TOOLS = frozenset({"execute"})


class ExecuteTasks:
    """`execute run` as a task (tasks.TaskCalls)."""

    def __init__(self, state: ServerState) -> None:
        self.state = state

    def task_tools(self) -> frozenset[str]:
        return _TASK_TOOLS

    async def queued_call(
        self, name: str, arguments: dict[str, Any], request: ServerRequestContext[Any, Any]
    ) -> QueuedCall:
        if name not in _TASK_TOOLS:
            raise MCPError(
                METHOD_NOT_FOUND,
                f"{name} does not run as a task (its execution.taskSupport is forbidden); call it without `task`",
            )
        action = arguments.get("action")
        if action != "run":
            raise MCPError(
                INVALID_PARAMS,
                f"execute runs as a task with action=run only, not {str(action)[:50]!r}; "
                "call every other action without `task`",
            )
        parameters = arguments.get("parameters")
        if parameters is not None and not isinstance(parameters, dict):
            raise MCPError(INVALID_PARAMS, "execute: parameters must be a JSON object")
        for key in ("item_id", "version", "approval_id", "context"):
            if arguments.get(key) is not None and not isinstance(arguments[key], str):
                raise MCPError(INVALID_PARAMS, f"execute: {key} must be a string")
        ref, version = split_ref(arguments.get("item_id"), arguments.get("version"))
        return QueuedCall(
            ref=ref,
            version=version,
            params=dict(parameters or {}),
            session=session_of_request(request, self.state.server_session),
            context=check_context_id(arguments.get("context")),
            approval_id=arguments.get("approval_id") or None,
        )

    def answer(self, result: CallToolResult, run: dict[str, Any]) -> CallToolResult:
        return result
