"""A queued run as an MCP task (protocol 2025-11-25): its Task object, its status message,
the cursor of `tasks/list`, and its result as the tool answer `tasks/result` gives.

    task_of(run)          # Task: taskId, status, statusMessage, createdAt, lastUpdatedAt, ttl, pollInterval
    task_answer(run)      # the CallToolResult the direct call would have given, tagged with the task

Everything here reads the run as `public.queued_run` returns it (runner/fleet/queue.py), so any
`kiwi serve` instance answers alike: the task is the row, nothing is kept in a process."""

from __future__ import annotations

import base64
import binascii
import json
from datetime import datetime
from typing import Any

from mcp.shared.exceptions import MCPError
from mcp_types import INVALID_PARAMS, CallToolResult, Task

from ..fleet import TERMINAL, task_status_of
from ..fleet.answers import result_of
from ..harness.mcp_answer import fail, rendered

__all__ = [
    "RELATED_TASK",
    "TERMINAL_TASK",
    "decode_cursor",
    "encode_cursor",
    "poll_interval_ms",
    "status_message",
    "task_answer",
    "task_of",
]

RELATED_TASK = "io.modelcontextprotocol/related-task"
"""The `_meta` key that ties a message (a result, a notification) to its task."""

TERMINAL_TASK = ("completed", "failed", "cancelled")

WORKING_POLL_MS = 1000
WAITING_POLL_MS = 3000
"""How often a client should poll: a running task each second; one that waits for a person
(input_required) or for a worker less often."""


def task_of(run: dict[str, Any]) -> Task:
    """The task of a queued run."""
    created = str(run["queued_at"])
    return Task(
        task_id=str(run["id"]),
        status=task_status_of(run),  # type: ignore[arg-type]  # one of TaskStatus's values
        status_message=status_message(run),
        created_at=created,
        last_updated_at=_last_update(run),
        ttl=_ttl_ms(run),
        poll_interval=poll_interval_ms(run),
    )


def status_message(run: dict[str, Any]) -> str:
    """What a person (or an agent) reading the task needs: the approval to ask for, the error of
    a failed task, else the latest thing the run said (a log line, its progress, a change of status)."""
    status = str(run.get("status"))
    tool = str(run.get("tool_id"))
    if status == "waiting_approval":
        aid = run.get("approval_id")
        return (
            f"waiting for approval {aid} to run {tool}: a person approves it with `kiwi approve {aid}` "
            f"(or denies it with `kiwi deny {aid}`), and the task goes on by itself"
        )
    if run.get("cancel_requested") and status not in TERMINAL:
        return "cancelled: the worker running it is stopping it"
    if status == "success":
        return f"{tool} ran; its result is in tasks/result"
    error = run.get("error")
    if status in TERMINAL and error:
        return str(error)
    if status == "queued":
        return f"queued: {tool} waits for a worker (kiwi worker) to take it"
    last = run.get("last_event")
    said = last.get("message") if isinstance(last, dict) else None
    return str(said) if said else status


def poll_interval_ms(run: dict[str, Any]) -> int:
    return WAITING_POLL_MS if run.get("status") in ("waiting_approval", "queued") else WORKING_POLL_MS


def task_answer(run: dict[str, Any], *, render: Any = None) -> CallToolResult:
    """The tool answer of a task that has ended, as the direct call would have answered
    (`render`, if given, rewords it for the server that answers: direct mode's hints), with
    `_meta` naming the task as the specification asks of `tasks/result`."""
    result = result_of(run)
    tool = str(run.get("tool_id"))
    status = task_status_of(run)
    if status == "cancelled":
        why = str(run.get("error") or "cancelled by request")
        answer = fail(
            f"the task running {tool} was cancelled: {why}",
            "call the tool again (as a task, or directly) to run it anew",
            kind="cancelled",
            extra={"task": {"taskId": str(run["id"]), "status": "cancelled"}},
        )
    elif result is not None:
        answer = rendered(result, tool)
        if render is not None:
            answer = render(answer, run)
    elif run.get("approval_id") and run.get("status") == "error":
        answer = fail(
            str(run.get("error") or "the approval was not given"),
            "the approval was denied or expired before anyone decided it; call the tool again for a new one",
            kind="approval_refused",
        )
    else:
        answer = fail(
            str(run.get("error") or f"{tool} ended without an answer"),
            "see the run's events: kiwi run-status " + str(run["id"]),
            kind="dead" if run.get("status") == "dead" else "error",
        )
    meta = {**(answer.meta or {}), RELATED_TASK: {"taskId": str(run["id"])}}
    return answer.model_copy(update={"meta": meta})


def encode_cursor(run: dict[str, Any]) -> str:
    """An opaque cursor for the page after `run` (the list is newest first)."""
    raw = json.dumps({"before": str(run["queued_at"])}).encode()
    return base64.urlsafe_b64encode(raw).decode().rstrip("=")


def decode_cursor(cursor: str | None) -> str | None:
    """The time the page starts before; a cursor this server did not give is -32602."""
    if cursor is None:
        return None
    try:
        raw = base64.urlsafe_b64decode(cursor + "=" * (-len(cursor) % 4))
        before = json.loads(raw)["before"]
        datetime.fromisoformat(before)
    except (binascii.Error, ValueError, KeyError, TypeError, UnicodeDecodeError):
        raise MCPError(INVALID_PARAMS, "invalid cursor: pass the nextCursor of an earlier tasks/list") from None
    return str(before)


def _stamp(value: Any) -> datetime | None:
    try:
        return datetime.fromisoformat(str(value)) if value else None
    except ValueError:
        return None


def _last_update(run: dict[str, Any]) -> str:
    last = run.get("last_event")
    candidates = [run.get("queued_at"), run.get("started_at"), run.get("finished_at")]
    if isinstance(last, dict):
        candidates.append(last.get("at"))
    stamps = [s for s in (_stamp(c) for c in candidates) if s is not None]
    return max(stamps).isoformat() if stamps else str(run["queued_at"])


def _ttl_ms(run: dict[str, Any]) -> int | None:
    """How long the task is kept from its creation (the run's keep_until), in milliseconds."""
    created, kept = _stamp(run.get("queued_at")), _stamp(run.get("keep_until"))
    if created is None or kept is None:
        return None
    return max(0, round((kept - created).total_seconds() * 1000))
