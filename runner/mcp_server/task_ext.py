"""A queued run as a task of the tasks extension (`io.modelcontextprotocol/tasks`), the form
tasks take on protocol 2026-07-28, where they left the core protocol.

    extension_status(run)     # working, completed, failed or cancelled
    created_task(run)         # the CreateTaskResult a tools/call answers with (resultType "task")
    detailed_task(run)        # what tasks/get answers: the task, its result or error inlined

The extension differs from 2025-11-25's tasks (task_view.py) in what the wire carries, not in
what a task is: the same queued run, read from Postgres as the caller, on any instance.

* The server decides which calls become tasks; a client only says it can take one, in each
  request's capabilities. Fields are flat (no `task` wrapper), `ttlMs` and `pollIntervalMs`.
* `tasks/get` inlines the end: `result` (the CallToolResult the direct call would have given)
  when `completed`, `error` (a JSON-RPC error) when `failed`. There is no tasks/result and no
  tasks/list; `tasks/update` answers the task's input requests, and `tasks/cancel` acknowledges.
* `failed` is for protocol errors only: a tool call whose result has `isError` is `completed`,
  its result saying so. A run dead-lettered without any answer (its workers never got one) is
  the one `failed` task, with -32603.
* `input_required` means the client owes an answer (`inputRequests`). A Kiwi approval is given
  by a person with `kiwi approve`, not by the client, so a run that waits for one is `working`,
  its status message naming the approval; approved, it goes on by itself.
"""

from __future__ import annotations

from typing import Any

from mcp_types import INTERNAL_ERROR, RequestParams
from mcp_types.version import MODERN_PROTOCOL_VERSIONS

from ..fleet import task_status_of
from ..fleet.answers import result_of
from .task_view import status_message, task_answer, task_of

__all__ = [
    "EXTENSION",
    "EXTENSION_VERSIONS",
    "UpdateTaskParams",
    "created_task",
    "detailed_task",
    "extension_status",
]

EXTENSION = "io.modelcontextprotocol/tasks"
"""The extension's identifier: in the server's capabilities (server/discover) and in each
request's client capabilities."""

EXTENSION_VERSIONS = frozenset(MODERN_PROTOCOL_VERSIONS)
"""The protocol versions whose tasks are the extension's (2026-07-28)."""


class UpdateTaskParams(RequestParams):
    """`tasks/update`: the client's answers to a task's input requests."""

    task_id: str
    input_responses: dict[str, Any] | None = None


def extension_status(run: dict[str, Any]) -> str:
    status = task_status_of(run)
    if status == "input_required":
        return "working"  # a person approves it, not the client: nothing for the client to answer
    if status == "failed":
        return "failed" if _no_answer(run) else "completed"
    return status


def _no_answer(run: dict[str, Any]) -> bool:
    return run.get("status") == "dead" and result_of(run) is None


def _fields(run: dict[str, Any]) -> dict[str, Any]:
    task = task_of(run)
    status = extension_status(run)
    message = status_message(run)
    if status == "completed" and run.get("status") == "success":
        message = f"{run.get('tool_id')} ran; its answer is the task's result"
    fields: dict[str, Any] = {
        "taskId": task.task_id,
        "status": status,
        "statusMessage": message,
        "createdAt": task.created_at,
        "lastUpdatedAt": task.last_updated_at,
        "ttlMs": task.ttl,
        "pollIntervalMs": task.poll_interval,
    }
    return fields


def created_task(run: dict[str, Any]) -> dict[str, Any]:
    """The answer of a tools/call the server made a task of (CreateTaskResult)."""
    return {"resultType": "task", **_fields(run)}


def detailed_task(run: dict[str, Any], *, render: Any = None) -> dict[str, Any]:
    """What tasks/get answers (GetTaskResult): the task, and once it ended its result or error."""
    fields = {"resultType": "complete", **_fields(run)}
    if fields["status"] == "completed":
        answer = task_answer(run, render=render)
        fields["result"] = answer.model_dump(by_alias=True, mode="json", exclude_none=True, exclude={"result_type"})
    elif fields["status"] == "failed":
        why = str(run.get("error") or f"{run.get('tool_id')} ended without an answer")
        fields["error"] = {"code": INTERNAL_ERROR, "message": why, "data": {"error": {"kind": "dead", "message": why}}}
    return fields
