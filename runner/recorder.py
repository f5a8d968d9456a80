"""Run records written behind the runs, in batches.

A run's result should not wait for its record: the record gets its id here (a random
uuid the database keeps), goes into a queue, and a background task writes whatever
has queued (after letting records gather for GATHER_S) in one `record_runs` call.
A record may be queued as the function that makes it, so that even building it (and
its JSON) happens in the writer, while the runs wait on their own I/O.
Each record is written as the principal its run acted as (runner/principal.py), so a
batch holds one principal's records: the database names that caller in every row.
Nothing is dropped: `flush()` waits until every record submitted so far is written,
and closing the runner flushes. A batch the registry refuses is reported through
`on_error`, naming how many records it held.
"""

from __future__ import annotations

import asyncio
import contextlib
import os
import uuid
from collections.abc import Callable
from dataclasses import dataclass
from typing import Any, TypeAlias

from .errors import KiwiError, UsageError
from .principal import Principal, acting_as, requested
from .registry.base import Registry

# A record, or the function that makes it (called by the writer, off the run's path).
Record: TypeAlias = dict[str, Any] | Callable[[], dict[str, Any]]

MAX_BATCH = 500
# How long the writer lets records gather before a write, unless flushed: runs that
# follow one another then share a round trip instead of paying one each.
GATHER_S = 0.1


@dataclass(frozen=True)
class _Queued:
    run_id: str | None  # a run record's id (None for an audit row, which the database names)
    record: Record
    principal: Principal | None  # whom the run acted as (None: the registry's own principal)
    kind: str  # "run" | "audit"


class RunIds:
    """Random (version 4) uuids for run records, the randomness read 4 KiB at a time: one
    system call per 256 ids rather than one per run."""

    def __init__(self) -> None:
        self._block = b""
        self._at = 0

    def __call__(self) -> str:
        if self._at >= len(self._block):
            self._block, self._at = os.urandom(4096), 0
        at, self._at = self._at, self._at + 16
        return str(uuid.UUID(bytes=self._block[at : at + 16], version=4))


class RunRecorder:
    def __init__(self, registry: Registry, on_error: Callable[[str], None] | None = None) -> None:
        self._registry = registry
        self._on_error = on_error
        self._pending: list[_Queued] = []
        self._writer: asyncio.Task[None] | None = None
        self.written = 0
        self.lost = 0
        self._hurry = asyncio.Event()
        self._new_id = RunIds()

    def submit(self, record: Record) -> str:
        """Queue a record (or the function that makes it); return the id it will be stored under."""
        run_id = (None if callable(record) else record.get("id")) or self._new_id()
        self._queue(_Queued(run_id, record, requested(), "run"))
        return run_id

    def submit_audit(self, entry: dict[str, Any]) -> None:
        """Queue an audit row (public.audit_log), written like the run records, as its caller."""
        self._queue(_Queued(None, entry, requested(), "audit"))

    def _queue(self, item: _Queued) -> None:
        self._pending.append(item)
        if self._writer is None or self._writer.done():
            self._writer = asyncio.get_running_loop().create_task(self._write())

    async def flush(self) -> None:
        """Wait until every record submitted so far is written (or reported lost)."""
        while self._writer is not None and not self._writer.done():
            self._hurry.set()
            await asyncio.shield(self._writer)

    async def _write(self) -> None:
        """Write what has queued, one batch per caller and kind, letting each batch gather for
        GATHER_S first (unless it is full or a flush hurries it): a busy runner then writes a
        few large batches a second instead of one per run, off its runs' event loop time."""
        try:
            while self._pending:
                if len(self._pending) < MAX_BATCH and not self._hurry.is_set():
                    with contextlib.suppress(TimeoutError):
                        await asyncio.wait_for(self._hurry.wait(), GATHER_S)
                queued, self._pending = self._pending[:MAX_BATCH], self._pending[MAX_BATCH:]
                groups: dict[tuple[Principal | None, str], list[_Queued]] = {}
                for item in queued:
                    groups.setdefault((item.principal, item.kind), []).append(item)
                for (principal, kind), theirs in groups.items():
                    with acting_as(principal):
                        await self._write_batch(kind, [r for r in map(self._made, theirs) if r is not None])
        finally:
            self._hurry.clear()

    async def _write_batch(self, kind: str, batch: list[dict[str, Any]]) -> None:
        write = self._registry.record_runs if kind == "run" else self._registry.record_audits
        if batch:
            try:
                await write(batch)
                self.written += len(batch)
            except UsageError as e:
                if len(batch) == 1:
                    self._report(kind, batch, e.message)
                    return
                # one bad record refuses its batch: write the rest one by one, losing only it
                for record in batch:
                    try:
                        await write([record])
                        self.written += 1
                    except KiwiError as single:
                        self._report(kind, [record], single.message)
            except KiwiError as e:
                self._report(kind, batch, e.message)

    def _made(self, queued: _Queued) -> dict[str, Any] | None:
        record = queued.record
        try:
            made = record() if callable(record) else record
            return made if queued.run_id is None else {**made, "id": queued.run_id}
        except Exception as e:  # a bug in what makes the record: say so, keep writing the others
            self._report(queued.kind, [{"id": queued.run_id}], f"the record could not be made: {e!r}")
            return None

    def _report(self, kind: str, batch: list[dict[str, Any]], why: str) -> None:
        self.lost += len(batch)
        if self._on_error:
            what = "run record(s)" if kind == "run" else "audit row(s)"
            self._on_error(f"{len(batch)} {what} not saved ({batch[0].get('tool_id')}…): {why}")
