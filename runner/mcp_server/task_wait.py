"""`tasks/result` waiting for its task to end, and telling its client what the run says meanwhile.

    run = await wait_for_end(queue, run, request)   # the run once its task is terminal

The specification has `tasks/result` block until the task is terminal. Whichever `kiwi serve`
instance got the request waits by reading the run from Postgres (QueuedRuns.follow), each
time only the events it has not seen yet. Each event the worker kept becomes
a notification for this request, tied to the task (`_meta` io.modelcontextprotocol/related-task):

* a log line (the tool's stderr) is a `notifications/message` at its level (notify_run.py's
  reading of its first word), when the connection's level allows it (log_level.py);
* every event is a `notifications/progress`, counting up, with the event's text as its message
  (a progress event with its own figures): for this request's progressToken if it sent one,
  else for the token the task was created with, which the specification keeps valid for the
  task's whole life.

A client that goes away cancels its request, and the waiting with it; the run goes on.
"""

from __future__ import annotations

import logging
from typing import Any

import anyio
from mcp.server.context import ServerRequestContext
from mcp_types import (
    LoggingMessageNotification,
    LoggingMessageNotificationParams,
    ProgressNotification,
    ProgressNotificationParams,
)

from ..fleet import QueuedRuns, task_status_of
from .log_level import allows
from .notify_run import line_level
from .task_view import RELATED_TASK, TERMINAL_TASK

__all__ = ["progress_token", "wait_for_end"]

logger = logging.getLogger("kiwi.mcp.tasks")


async def wait_for_end(
    queue: QueuedRuns, run: dict[str, Any], request: ServerRequestContext[Any, Any]
) -> dict[str, Any]:
    """Read `run` again until its task is terminal, forwarding its events; returns it then."""
    tell = _Teller(request, str(run["id"]), run.get("progress_token"))
    last = run
    async for events, last in queue.follow(run, ended=lambda r: task_status_of(r) in TERMINAL_TASK):  # noqa: B007
        for event in events:
            await tell.event(event)
    return last


def progress_token(request: ServerRequestContext[Any, Any]) -> str | int | None:
    """The progressToken of a request's `_meta`, if it sent one (the SDK reads it as progress_token)."""
    token = request.meta.get("progress_token") if request.meta is not None else None
    return token if isinstance(token, str | int) and not isinstance(token, bool) else None


class _Teller:
    """The notifications of one waiting `tasks/result` request."""

    def __init__(self, request: ServerRequestContext[Any, Any], task_id: str, task_token: Any) -> None:
        self._request = request
        self._meta = {RELATED_TASK: {"taskId": task_id}}
        own = progress_token(request)
        self._token = own if own is not None else task_token
        self._count = 0.0

    async def event(self, event: dict[str, Any]) -> None:
        kind, message = event.get("kind"), str(event.get("message") or "")
        try:
            if kind == "log" and message:
                level = line_level(message)
                if allows(self._request, level):
                    params = LoggingMessageNotificationParams(level=level, data=message, logger="kiwi.task")
                    await self._send(LoggingMessageNotification(params=params.model_copy(update={"meta": self._meta})))
            await self._progress(event, message)
        except (anyio.ClosedResourceError, anyio.BrokenResourceError):
            pass  # the client went away: the run goes on, and its task answers whoever asks next
        except Exception:
            logger.debug("a task's notification could not be sent", exc_info=True)

    async def _progress(self, event: dict[str, Any], message: str) -> None:
        if self._token is None:
            return
        done, total = event.get("progress"), event.get("total")
        if isinstance(done, int | float) and done > self._count:
            self._count = float(done)
        else:
            self._count += 1
            total = None
        params = ProgressNotificationParams(
            progress_token=self._token, progress=self._count, total=total, message=message or None
        )
        await self._send(ProgressNotification(params=params.model_copy(update={"meta": self._meta})))

    async def _send(self, notification: LoggingMessageNotification | ProgressNotification) -> None:
        await self._request.session.send_notification(notification, related_request_id=self._request.request_id)
