"""The run queue as its callers use it: queue a run, read it, cancel it, list runs,
schedules. Every call is one RPC, made as the caller (RLS decides what each may see); the
queue's rules live in SQL (supabase/schemas/560_run_queue.sql, 590_schedules.sql)."""

from __future__ import annotations

import asyncio
from collections.abc import AsyncIterator, Callable
from typing import Any

from .. import telemetry
from ..errors import NotFound, UsageError
from ..registry.base import Registry, checked_uuid

__all__ = ["OPEN", "TERMINAL", "QueuedRuns", "task_status", "task_status_of"]

OPEN = ("queued", "running", "retrying", "waiting_approval")
TERMINAL = ("success", "error", "timeout", "cancelled", "dead")
MIN_POLL_S, MAX_POLL_S = 0.1, 1.0  # how often follow() reads a run: talking, then quiet

# A queued run's status as an MCP task's (2025-11-25: working, input_required, completed,
# failed, cancelled). The specification counts a tool call whose result has isError as
# failed, so a run that ended in error or timeout fails its task, as `dead` (every attempt
# failed) does; only a success completes it.
_TASK_STATUS = {
    "queued": "working",
    "running": "working",
    "retrying": "working",
    "waiting_approval": "input_required",
    "success": "completed",
    "error": "failed",
    "timeout": "failed",
    "cancelled": "cancelled",
    "dead": "failed",
}


def task_status(status: str) -> str:
    return _TASK_STATUS.get(status, "working")


def task_status_of(run: dict[str, Any]) -> str:
    """A queued run's task status: once a cancel was asked for, the task is cancelled and stays
    so (the specification's rule), even while its worker is still stopping it, and even if the
    run got to finish first."""
    if run.get("cancel_requested"):
        return "cancelled"
    return task_status(str(run.get("status")))


class QueuedRuns:
    """Queue, read and cancel runs, and keep schedules, through the registry's backend as the
    principal of the running request."""

    def __init__(self, registry: Registry) -> None:
        if not self.supported(registry):
            raise UsageError(
                "queued runs need the Postgres registry",
                hint="set KIWI_DATABASE_URL (the REST backend cannot queue runs yet)",
            )
        self._backend: Any = registry.backend

    @staticmethod
    def supported(registry: Registry) -> bool:
        """Whether runs can be queued through this registry (its backend is Postgres's)."""
        backend = getattr(registry, "backend", None)
        return backend is not None and hasattr(backend, "call")

    async def _call(self, function: str, **args: Any) -> Any:
        return await self._backend.call(function, args)

    async def enqueue(
        self,
        tool_id: str,
        params: dict[str, Any] | None = None,
        *,
        version: str | None = None,
        session_id: str | None = None,
        keep_s: float | None = None,
        context: str | None = None,
        approval_id: str | None = None,
        progress_token: str | int | None = None,
        traceparent: str | None = None,
    ) -> dict[str, Any]:
        """Queue a run as the caller; the answer is the queued run (its id, status queued).
        `context`: the execution context the run is checked against when it runs (a
        directive's permissions); `approval_id`: an approval it uses; `progress_token`: the MCP
        task's, for the progress notifications of whoever waits for it; `traceparent`: the trace
        the worker's spans continue (default: the current one, when telemetry is on)."""
        request: dict[str, Any] = {"tool_id": tool_id, "params": params or {}}
        if version:
            request["version"] = version
        if session_id:
            request["session_id"] = session_id[:200]
        if keep_s is not None:
            request["keep_s"] = keep_s
        if context:
            request["context"] = _uuid(context, what="context", hint="an execution context's id is a uuid")
        if approval_id:
            request["approval_id"] = _uuid(approval_id, what="approval_id", hint="an approval's id is a uuid")
        if progress_token is not None:
            request["progress_token"] = progress_token
        if traceparent := traceparent or telemetry.traceparent():
            request["traceparent"] = traceparent
        answer: dict[str, Any] = await self._call("enqueue_run", p=request)
        return answer

    async def get(self, run_id: str, *, after_event: int = 0, events: bool = True) -> dict[str, Any]:
        """The queued run (with the events after `after_event`, none if not `events`; its latest
        is `last_event` either way); NotFound when the caller may not read it or it is gone."""
        after = after_event if events else _NO_EVENTS
        answer = await self._call("queued_run", p_id=_uuid(run_id), p_after_event=after)
        if answer is None:
            raise NotFound(f"queued run {run_id} not found", hint="list your runs with `kiwi runs --queued`")
        found: dict[str, Any] = answer
        return found

    async def follow(
        self, run: dict[str, Any], *, ended: Callable[[dict[str, Any]], bool] | None = None
    ) -> AsyncIterator[tuple[list[dict[str, Any]], dict[str, Any]]]:
        """(the events not seen yet, the run) each time the run is read again, until `ended(run)`
        (default: its status is terminal); the last pair holds the ended run. Read every
        MIN_POLL_S while the run is saying something, backing off to MAX_POLL_S when it is quiet
        or waiting for a person: any instance can follow any run, through Postgres alone."""
        done = ended or (lambda r: r.get("status") in TERMINAL)
        seen, pause = 0, MIN_POLL_S
        while True:
            events = [e for e in run.get("events") or [] if isinstance(e, dict) and int(e.get("id") or 0) > seen]
            seen = max([seen, *(int(e["id"]) for e in events)])
            yield events, run
            if done(run):
                return
            pause = MIN_POLL_S if events else min(pause * 1.5, MAX_POLL_S)
            await asyncio.sleep(pause)
            run = await self.get(str(run["id"]), after_event=seen)

    async def cancel(self, run_id: str) -> dict[str, Any]:
        answer: dict[str, Any] = await self._call("cancel_queued_run", p_id=_uuid(run_id))
        return answer

    async def page(
        self, *, status: str | None = None, limit: int = 50, before: str | None = None
    ) -> list[dict[str, Any]]:
        """The caller's queued runs, newest first (admins: everyone's)."""
        rows: list[dict[str, Any]] = await self._backend.call(
            "queued_runs_page", {"p_status": status, "p_limit": limit, "p_before": before}, read=True
        )
        return rows

    async def add_schedule(self, request: dict[str, Any]) -> dict[str, Any]:
        answer: dict[str, Any] = await self._call("add_schedule", p=request)
        return answer

    async def set_schedule_enabled(self, ref: str, enabled: bool) -> dict[str, Any]:
        answer: dict[str, Any] = await self._call("set_schedule_enabled", p_ref=ref, p_enabled=enabled)
        return answer

    async def remove_schedule(self, ref: str) -> dict[str, Any]:
        answer: dict[str, Any] = await self._call("remove_schedule", p_ref=ref)
        return answer

    async def schedules(self) -> list[dict[str, Any]]:
        rows: list[dict[str, Any]] = await self._backend.call("my_schedules", {}, read=True)
        return rows

    async def workers(self) -> list[dict[str, Any]]:
        rows: list[dict[str, Any]] = await self._backend.call("fleet_workers", {}, read=True)
        return rows


_NO_EVENTS = -1  # public.queued_run then sends none


def _uuid(value: str, *, what: str = "run id", hint: str = "a queued run's id is a uuid (kiwi runs --queued)") -> str:
    return checked_uuid(value, f"{str(value)[:100]!r} is not a {what}", hint)
