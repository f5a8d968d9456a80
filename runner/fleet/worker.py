"""`kiwi worker`: takes queued runs off the pgmq queue and runs them, as the callers who
queued them, through the same gate and sandbox as a direct run.

    take      worker_take: up to `concurrency` runs, hidden from other workers for a lease and
              the tool's own time limit (extended at the start when the take could not tell it)
    run       Runner.run as the run's caller (the claims it was queued with); the lease is
              renewed while it runs, and a cancel asked from anywhere (pg_notify, or the
              answer of a renewal) kills its processes
    finish    worker_finish: result, run record, audit rows and the message's archive in one
              transaction, for this attempt only; or a retry after backoff; or dead-lettered. A run the gate
              holds for approval waits off the queue (worker_wait_approval)
    tick      queue_tick, under an advisory lock: due schedules, expired approvals, old runs

A worker that dies loses nothing: its messages come back after their lease and another
worker takes them; the attempt that finishes first is the one recorded. Wake-ups come from
LISTEN kiwi_runs, so an idle worker starts a run within milliseconds of its queueing; a
poll every few seconds covers a lost notification.
"""

from __future__ import annotations

import asyncio
import contextlib
import logging
import os
import socket
import time
import uuid
from collections.abc import Mapping
from dataclasses import dataclass, field
from typing import Any

from .. import telemetry
from ..config import Settings
from ..errors import KiwiError, RegistryUnavailable
from ..harness.run import Runner, RunResult
from ..policy import Call, Denied
from ..primitives.base import RunListener
from ..principal import Principal, acting_as, admin, from_claims
from ..registry.base import Registry
from .notices import Notices

__all__ = ["Worker", "WorkerOptions"]

logger = logging.getLogger("kiwi.worker")

REPORTS_S = 5.0
"""How long a run's end waits for its last events to be written (one round trip each)."""


@dataclass(frozen=True)
class WorkerOptions:
    """How a worker works: how many runs at once, the lease a taken run is hidden for (renewed
    every third of it while it runs), how often it polls without a wake-up and calls
    queue_tick, and how many runs it takes before it stops (None: until told to stop)."""

    concurrency: int = 1
    lease_s: float = 30.0
    poll_s: float = 5.0
    tick_s: float = 1.0
    max_runs: int | None = None
    worker_id: str = field(default_factory=lambda: str(uuid.uuid4()))


@dataclass
class _Held:
    """A run this worker holds: the attempt it took, its task, whether a cancel was asked, and
    the writing of the last event it said (each waits for the one before: they are kept in order)."""

    run_id: str
    attempt: int
    task: asyncio.Task[None] | None = None  # the run's whole handling, from take to finish
    run: asyncio.Task[Any] | None = None  # the run itself: what a cancel stops
    cancel_asked: bool = False
    last_report: asyncio.Task[None] | None = None


class Worker:
    def __init__(self, registry: Registry, settings: Settings, runner: Runner, options: WorkerOptions) -> None:
        self.registry = registry
        self.settings = settings
        self.runner = runner
        self.runner.local_spaces = False  # a queued run is the registry's tool, never this machine's files
        self.options = options
        # the worker's own calls (take, extend, finish, ...) go on connections of their own, which
        # stay the admin's, while the runs' go on the registry's, as their callers
        shared: Any = registry.backend
        apart = getattr(shared, "apart", None)
        self.backend: Any = apart(admin(), max_size=options.concurrency + 2) if apart else shared
        self._own_backend = self.backend is not shared
        self.held: dict[str, _Held] = {}
        self.done = 0
        self.polls = 0  # how many times the take loop waited for a wake-up or its poll
        self._wake = asyncio.Event()
        self._notices = Notices(settings.database_url, self._woken, self._cancel_asked)

    # -- the loop ---------------------------------------------------------------------------

    async def run(self, stop: asyncio.Event) -> None:
        """Work until `stop` is set (or max_runs runs have ended), then let held runs finish."""
        await self._notices.start()
        beat = asyncio.create_task(self._beat_loop(stop))
        try:
            await self._take_loop(stop)
        finally:
            tasks = [h.task for h in self.held.values() if h.task is not None]
            if tasks:
                await asyncio.gather(*tasks, return_exceptions=True)
            beat.cancel()
            with contextlib.suppress(asyncio.CancelledError):
                await beat
            with contextlib.suppress(KiwiError, OSError):
                await self._admin("worker_beat", self._beat_args(stopping=True))
            await self._notices.stop()
            if self._own_backend:
                await self.backend.aclose()

    async def _take_loop(self, stop: asyncio.Event) -> None:
        next_tick = 0.0
        while not stop.is_set() and not self._enough():
            now = time.monotonic()
            if now >= next_tick:
                next_tick = now + self.options.tick_s
                await self._tick()
            self._wake.clear()  # before looking: a wake-up from now on is not lost
            free = self.options.concurrency - len(self.held)
            try:
                taken = await self._take(free) if free > 0 else 0
            except RegistryUnavailable as e:  # the database is away: keep the runs held, try again
                logger.warning("cannot take queued runs: %s; trying again in %g s", e, self.options.poll_s)
                taken, next_tick = 0, time.monotonic() + self.options.poll_s
            if taken is None or (taken and taken == free):
                continue  # more may be waiting (or only skipped messages were read so far): take again at once
            self.polls += 1
            wait = min(self.options.poll_s, max(next_tick - time.monotonic(), 0.01))
            with contextlib.suppress(TimeoutError):
                await asyncio.wait_for(self._either(stop), timeout=wait)

    def abandon(self) -> None:
        """Stop the runs held now, without finishing them: each comes back to the queue after its
        lease, for another worker (a second Ctrl-C)."""
        for held in list(self.held.values()):
            if held.task is not None:
                held.task.cancel()

    def _enough(self) -> bool:
        limit = self.options.max_runs
        return limit is not None and self.done + len(self.held) >= limit

    async def _either(self, stop: asyncio.Event) -> None:
        waits = [asyncio.create_task(self._wake.wait()), asyncio.create_task(stop.wait())]
        try:
            await asyncio.wait(waits, return_when=asyncio.FIRST_COMPLETED)
        finally:
            for task in waits:
                task.cancel()

    def _woken(self) -> None:
        self._wake.set()

    def _cancel_asked(self, run_id: str) -> None:
        held = self.held.get(run_id)
        if held is not None and not held.cancel_asked:
            held.cancel_asked = True
            if held.run is not None:
                held.run.cancel()

    async def _admin(self, function: str, args: Mapping[str, Any]) -> Any:
        with acting_as(admin()):
            return await self.backend.call(function, args)

    async def _tick(self) -> None:
        try:
            await self._admin("queue_tick", {})
        except KiwiError as e:
            logger.warning("queue_tick failed: %s", e)

    async def _take(self, free: int) -> int | None:
        """Take up to `free` runs and start them: how many; None when worker_take stopped after
        skipping many messages of ended runs before it had enough (read again at once)."""
        limit = self.options.max_runs
        if limit is not None:
            free = min(free, limit - self.done - len(self.held))
        with acting_as(admin()):
            rows = await self.backend.call(
                "worker_take",
                {"p_worker": self.options.worker_id, "p_count": free, "p_lease_s": _seconds(self.options.lease_s)},
                returns="column",
            )
        more, taken = False, 0
        for row in rows:
            if "id" not in row:  # {"skipped": n, "more": true}: worker_take stopped early
                more = bool(row.get("more"))
                continue
            held = _Held(str(row["id"]), int(row["attempt"]))
            self.held[held.run_id] = held
            held.task = asyncio.create_task(self._run_one(held, row), name=f"kiwi-run-{held.run_id}")
            taken += 1
        return None if more and taken < free else taken

    # -- one run ----------------------------------------------------------------------------

    async def _run_one(self, held: _Held, row: dict[str, Any]) -> None:
        keeping = asyncio.create_task(self._keep_lease(held))
        try:
            await self._settle(held, row)
        except Exception:  # a bug here must not end the worker: the run comes back after its lease
            logger.exception("queued run %s failed in the worker", held.run_id)
        finally:
            keeping.cancel()
            self.held.pop(held.run_id, None)
            self.done += 1
            self._wake.set()

    async def _settle(self, held: _Held, row: dict[str, Any]) -> None:
        try:
            caller = _caller(row.get("claims") or {})
        except KiwiError as e:
            await self._finish(held, _failed(row, f"the run's caller cannot be acted as: {e}"), None, None)
            return
        kept = _Kept(caller, held.run_id)
        held.run = run = asyncio.create_task(self._execute(held, row, caller, kept))
        if held.cancel_asked:  # asked before it started
            run.cancel()
        try:
            result, retry = await run
        except asyncio.CancelledError:
            current = asyncio.current_task()
            if current is not None and current.cancelling():  # the worker itself is stopping now
                run.cancel()  # the run's processes end; the run comes back to the queue after its lease
                with contextlib.suppress(asyncio.CancelledError):
                    await run
                self._audit_behind(kept)  # the attempt's audit row, written behind as for a direct run
                raise
            # the run was cancelled: its processes are gone once it has returned (primitives/subprocess.py)
            result = _failed(row, "cancelled while it ran (kiwi cancel)")
            await self._finish(held, result, kept, None, status="cancelled")
            return
        failure = result.failure
        if isinstance(failure, Denied) and failure.kind == "approval_pending":
            approval = failure.extra.get("approval") or {}
            await self._admin(
                "worker_wait_approval",
                {"p_id": held.run_id, "p_attempt": held.attempt, "p_approval_id": approval.get("id")},
            )
            return
        await self._finish(held, result, kept, retry)

    async def _execute(
        self, held: _Held, row: dict[str, Any], caller: Principal, record_to: _Kept
    ) -> tuple[RunResult, dict[str, Any] | None]:
        """Run as the caller; returns the result and the tool's retry rule (config.requeue)."""
        tool_id, version = str(row["tool_id"]), row.get("version")
        call = Call(
            str(row.get("session_id") or f"queue-{held.run_id}"),
            context=row.get("context_id"),
            approval_id=row.get("approval_id"),
            run_id=held.run_id,  # its record's id: a checkpoint names it (harness/checkpoint.py)
        )
        with acting_as(caller), telemetry.continued(row.get("traceparent")):  # the queuer's trace goes on
            try:
                plan = await self.runner.plan(tool_id, version)
            except KiwiError as e:
                return _failed(row, str(e), failure=e), None
            # hidden for longer than the run's own time limit: as taken (worker_take adds the limit of
            # the tool's cached plan), or extended now, beside the run rather than before it
            needed = _lease_for(plan.config, self.options.lease_s)
            granted = row.get("lease_s")
            covered = isinstance(granted, int | float) and granted >= needed
            extending = None if covered else asyncio.create_task(self._extend(held, needed))
            listener = _reporter(self, held)
            result = await self.runner.run(
                tool_id,
                row.get("params") or {},
                version=version,
                plan=plan,
                call=call,
                listener=listener,
                record_to=record_to,
            )
            if extending is not None:
                await extending
        retry = plan.config.get("requeue") if isinstance(plan.config, dict) else None
        return result, retry if isinstance(retry, dict) else None

    async def _finish(
        self,
        held: _Held,
        result: RunResult,
        kept: _Kept | None,
        retry: dict[str, Any] | None,
        *,
        status: str | None = None,
    ) -> None:
        """The run's end, its record and audit rows in one transaction (worker_finish); an attempt
        found stale writes no record, and its audit rows are written behind (it did run)."""
        if held.last_report is not None:  # what the run said is written before it ends: its poller sees all
            await asyncio.wait({held.last_report}, timeout=REPORTS_S)
        try:
            ended = await self._finish_call(held, _answer(result), status or result.status, kept, retry)
        except KiwiError:
            if kept is not None:  # the run comes back after its lease; this attempt's audit row is kept
                self._audit_behind(kept)
            raise
        if ended == "stale":
            logger.info("queued run %s moved on without attempt %s: its result is dropped", held.run_id, held.attempt)
            if kept is not None:
                self._audit_behind(kept)

    async def _finish_call(
        self, held: _Held, answer: dict[str, Any], status: str, kept: _Kept | None, retry: dict[str, Any] | None
    ) -> str:
        ended: str = await self._admin(
            "worker_finish",
            {
                "p_id": held.run_id,
                "p_attempt": held.attempt,
                "p_status": status,
                "p_result": answer,
                "p_record": kept.runs[0] if kept and kept.runs else None,
                "p_retry": retry,
                "p_audits": kept.audits if kept and kept.audits else None,
            },
        )
        return ended

    def _audit_behind(self, kept: _Kept) -> None:
        """The attempt's audit rows through the runner's recorder, as its caller, when no
        worker_finish of this attempt writes them."""
        with acting_as(kept.caller):
            for entry in kept.audits:
                self.runner.recorder.submit_audit(entry)
        kept.audits.clear()

    async def _keep_lease(self, held: _Held) -> None:
        """Every third of the lease: keep the run hidden, and hear whether it was cancelled or
        taken by another attempt (then stop it)."""
        lease = self.options.lease_s
        while True:
            await asyncio.sleep(max(lease / 3, 0.2))
            answer = await self._extend(held, lease)
            if answer and (answer.get("cancel") or not answer.get("held")):
                self._cancel_asked(held.run_id)

    async def _extend(self, held: _Held, lease_s: float) -> dict[str, Any] | None:
        try:
            answer: dict[str, Any] = await self._admin(
                "worker_extend", {"p_id": held.run_id, "p_attempt": held.attempt, "p_lease_s": _seconds(lease_s)}
            )
            return answer
        except KiwiError as e:
            logger.warning("could not extend the lease of run %s: %s", held.run_id, e)
            return None

    async def report(
        self, run_id: str, kind: str, message: str, done: float | None = None, total: float | None = None
    ) -> None:
        with contextlib.suppress(KiwiError):
            await self._admin(
                "worker_event",
                {"p_id": run_id, "p_kind": kind, "p_message": message[:2000], "p_progress": done, "p_total": total},
            )

    # -- the fleet ------------------------------------------------------------------------

    def _beat_args(self, *, stopping: bool = False) -> dict[str, Any]:
        return {
            "p_worker": self.options.worker_id,
            "p_host": socket.gethostname(),
            "p_pid": os.getpid(),
            "p_concurrency": self.options.concurrency,
            "p_running": list(self.held),
            "p_stopping": stopping,
        }

    async def _beat_loop(self, stop: asyncio.Event) -> None:
        while not stop.is_set():
            try:
                await self._admin("worker_beat", self._beat_args())
            except KiwiError as e:
                logger.warning("worker_beat failed: %s", e)
            with contextlib.suppress(TimeoutError):
                await asyncio.wait_for(stop.wait(), timeout=5.0)


@dataclass
class _Kept:
    """A queued run's record and audit rows, kept by the worker to write with its result
    (harness/run.py's RecordSink). Its record is stored under the queued run's id, which its
    audit rows name."""

    caller: Principal
    run_id: str
    runs: list[dict[str, Any]] = field(default_factory=list)
    audits: list[dict[str, Any]] = field(default_factory=list)

    def run(self, record: dict[str, Any]) -> None:
        self.runs.append(record)

    def audit(self, entry: dict[str, Any]) -> None:
        self.audits.append(entry if entry.get("run_id") else {**entry, "run_id": self.run_id})


def _reporter(worker: Worker, held: _Held) -> RunListener:
    """What a running run says (its stderr lines, what the runner and its server report), kept
    as the run's events for whoever polls it (at most 200); secrets are masked before this.
    They are written behind the run, one after another in the order said, and all of them
    before it ends (_finish)."""
    sent = 0

    async def write(before: asyncio.Task[None] | None, *event: Any) -> None:
        if before is not None:
            await asyncio.wait({before})
        await worker.report(held.run_id, *event)

    def send(kind: str, message: str | None, done: float | None = None, total: float | None = None) -> None:
        nonlocal sent
        if sent >= 200 or (not message and done is None):
            return
        sent += 1
        event = (kind, message or "", done, total)
        held.last_report = asyncio.get_running_loop().create_task(write(held.last_report, *event))

    return RunListener(
        line=lambda line: send("log", line),
        progress=lambda message, done, total: send("progress", message, done, total),
    )


def _caller(claims: Mapping[str, Any]) -> Principal:
    if claims.get("role") == "service_role" and "sub" not in claims:
        return admin()
    return from_claims(claims, source="queued")


def _lease_for(config: Any, lease_s: float) -> float:
    """Longer than the run's own time limit: its timeout (the primitive's config), and the lease."""
    timeout = config.get("timeout") if isinstance(config, dict) else None
    return (float(timeout) if isinstance(timeout, int | float) and timeout > 0 else 0.0) + lease_s


def _seconds(value: float) -> int:
    return max(1, round(value))


def _failed(row: dict[str, Any], error: str, *, failure: KiwiError | None = None) -> RunResult:
    return RunResult(
        tool_id=str(row["tool_id"]), version=row.get("version"), status="error", error=error, failure=failure
    )


def _answer(result: RunResult) -> dict[str, Any]:
    """The result as the caller gets it back (kept in queued_runs.result): what `kiwi run --json`
    prints, with the run's warnings, and the error's kind when a deliberate error stopped it;
    with what an MCP answer of the run shows besides (the context a directive opened, the
    outputs schema, a knowledge entry's source), so a task's result reads as the direct call's
    (runner/fleet/answers.py)."""
    answer = {**result.as_json(), "warnings": result.warnings, "run_id": result.run_id}
    if result.failure is not None:
        answer["failure"] = result.failure.as_dict()
    if result.context is not None:
        answer["context"] = result.context
    if result.output_schema is not None:
        answer["output_schema"] = result.output_schema
    if source := result.detail.get("source"):
        answer["source"] = source
    return answer
