"""A run, followed by the MCP request that started it: its stderr lines and progress become
notifications for that request, sent as they happen and all before its answer.

    async with following(ctx, ref) as listener:      # None outside a request
        result = await guarded_run(..., listener=listener)

* each line the tool writes to stderr is a `notifications/message` (logger: the tool's ref;
  level: from the line's first word, else "info"), when the connection's level allows it
  (log_level.py);
* when the client sent a progressToken, a `notifications/progress` for each stderr line and
  each step of preparing the run (an environment being built), counting up, with the line as
  its message; an upstream MCP server's own progress (an mcp_tool) passes through.

The runner masks the run's secrets before the listener hears anything (harness/listening.py).
The callbacks only queue, since they are called on the event loop from a process's pipe; one
task sends, in order, started by the first thing queued (a run that says nothing, the common
case, costs no task). At most MAX_PENDING wait: a tool that writes faster than its client reads
loses lines, and a last message says how many.
"""

from __future__ import annotations

import asyncio
import logging
from collections.abc import AsyncIterator
from contextlib import asynccontextmanager
from typing import Any

import anyio
from mcp.server.context import ServerRequestContext
from mcp.server.mcpserver import Context
from mcp_types import LoggingLevel, LoggingMessageNotification, LoggingMessageNotificationParams

from ..primitives.base import RunListener
from .log_level import allows

__all__ = ["MAX_PENDING", "following", "line_level"]

logger = logging.getLogger("kiwi.mcp.server")

MAX_PENDING = 1000  # notifications waiting to be sent; more are dropped, and counted
DRAIN_S = 5.0  # once the run is over, how long its last notifications may take to go out

_FIRST_WORDS: tuple[tuple[str, LoggingLevel], ...] = (
    ("debug", "debug"),
    ("traceback", "error"),
    ("trace", "debug"),
    ("notice", "notice"),
    ("warn", "warning"),
    ("error", "error"),
    ("err:", "error"),
    ("exception", "error"),
    ("fatal", "critical"),
    ("critical", "critical"),
    ("panic", "critical"),
)


def line_level(line: str) -> LoggingLevel:
    """A stderr line's level, by its first word as loggers write it (`WARNING: ...`, `[error] ...`,
    `Traceback ...`); any other line is "info"."""
    head = line.lstrip().lstrip("[<(").lower()
    for word, level in _FIRST_WORDS:
        if head.startswith(word):
            return level
    return "info"


@asynccontextmanager
async def following(ctx: Context[Any, Any] | None, ref: str | None) -> AsyncIterator[RunListener | None]:
    """A listener whose lines and progress go to the client of `ctx`'s request, as notifications
    for that request; None when there is no request (a meta-tool called directly)."""
    request = _request_of(ctx)
    if request is None:
        yield None
        return
    stream = _Stream(request, ref or "kiwi")
    try:
        yield stream.listener
    except BaseException:  # cancelled (the request was): nothing more goes to its client
        stream.close()
        if stream.sender is not None:
            stream.sender.cancel()
        raise
    stream.close()
    if stream.sender is not None:  # all of it before the answer
        await asyncio.wait({stream.sender}, timeout=DRAIN_S)
        stream.sender.cancel()


def _request_of(ctx: Context[Any, Any] | None) -> ServerRequestContext[Any, Any] | None:
    if ctx is None:
        return None
    try:
        request = ctx.request_context
    except ValueError:  # outside a request
        return None
    return request if request.request_id is not None else None


class _Stream:
    """One request's queue of notifications and the task that sends them."""

    def __init__(self, request: ServerRequestContext[Any, Any], ref: str) -> None:
        self._request = request
        self._ref = ref
        self._send, self._receive = anyio.create_memory_object_stream[tuple[Any, ...]](MAX_PENDING)
        self._dropped = 0
        self._last = 0.0  # the last progress sent: each one must be greater
        self.listener = RunListener(line=self._line, progress=self._progress)
        self.sender: asyncio.Task[None] | None = None  # started by the first item queued
        self._loop = asyncio.get_running_loop()

    # -- called by the run, on the event loop; they never wait -------------------------------

    def _line(self, text: str) -> None:
        level = line_level(text)
        if allows(self._request, level):
            self._put(("log", level, text))
        self._put(("progress", text, None, None))  # sent only if the client asked (report_progress)

    def _progress(self, message: str | None, done: float | None, total: float | None) -> None:
        self._put(("progress", message, done, total))

    def _put(self, item: tuple[Any, ...]) -> None:
        try:
            self._send.send_nowait(item)
        except anyio.WouldBlock:
            self._dropped += 1
        except (anyio.ClosedResourceError, anyio.BrokenResourceError):
            return  # the request is over: nobody to tell
        if self.sender is None:
            self.sender = self._loop.create_task(self.pump(), name=f"kiwi-notify:{self._ref}")

    def close(self) -> None:
        self._send.close()

    # -- the sender ------------------------------------------------------------------------

    async def pump(self) -> None:
        async with self._receive:
            async for item in self._receive:
                await self._deliver(item)
        if self._dropped and allows(self._request, "warning"):
            note = f"{self._dropped} lines of {self._ref} were not sent: it wrote faster than they could go"
            await self._deliver(("log", "warning", note))

    async def _deliver(self, item: tuple[Any, ...]) -> None:
        session = self._request.session
        try:
            if item[0] == "log":
                params = LoggingMessageNotificationParams(level=item[1], data=item[2], logger=self._ref)
                notification = LoggingMessageNotification(params=params)
                await session.send_notification(notification, related_request_id=self._request.request_id)
                return
            _, message, done, total = item
            if done is None:
                done = self._last + 1
            elif done <= self._last:
                return  # progress only goes up (the specification's rule); an upstream repeat is dropped
            self._last = done
            await session.report_progress(done, total, message)
        except (anyio.ClosedResourceError, anyio.BrokenResourceError):
            pass  # the client went away; the run goes on and answers whoever is left
        except Exception:
            logger.debug("a run's notification could not be sent", exc_info=True)
