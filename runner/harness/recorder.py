"""Run records written behind the runs, in batches.

A run's result should not wait for its record: the record gets its id here (a random
uuid the database keeps), goes into a queue, and a background task writes whatever
has queued (after letting records gather for GATHER_S) in one round trip per caller:
`record_calls`, its run records and audit rows together (`record_runs` or `record_audits`
when it has only one kind; each on its own again when a batch is refused, to find the record
that was refused).
A record may be queued as the function that makes it, so that even building it (and
its JSON) happens in the writer, while the runs wait on their own I/O.
Each record is written as the principal its run acted as (runner/principal.py), so a
batch holds one principal's records: the database names that caller in every row.
Nothing is dropped: `flush()` waits until every record submitted so far is written,
and closing the runner flushes. A batch the registry refuses is reported through
`on_error`, naming how many records it held.

A batch that fails because the registry is unreachable (a restart, a killed connection)
is kept and written again, waiting RETRY_S, then twice as long each time (up to
RETRY_MAX_S), for at most KEEP_S; a flush tries once more at once. Only then are its
records reported lost, counted. Such a write may have landed even so (the connection
died after the commit), so every record and audit row carries an id chosen here: a
later write of a record that meets its own id (23505) counts it as written, and
nothing is stored twice. An audit row that has to wait is given the time it was
queued (`at`), which the database would otherwise set when it is written.

With a journal (journal.py), every record is also on local disk before the call that
made it returns, until the registry has it: a process killed right after its reply, or
one that stopped while the registry was unreachable, leaves its records there, and the
next recorder of the same registry writes them (at its start, when it is made inside a
running event loop, else at its first record). A record is then made when it is
submitted, not in the writer, and encoded once: the JSON text its journal line holds is the
text the writer sends (registry.base.Rows), unless the record changed since.

Anonymous callers' audit rows are written in batches of at most ANON_BATCH, within the
budget the registry gives all anonymous callers a minute (530_anonymous_audit.sql):
a batch refused for want of room (PT429) is kept and written again, as when the registry
is unreachable, once the minute has turned.
"""

from __future__ import annotations

import asyncio
import contextlib
import os
import time
from collections.abc import Callable
from dataclasses import dataclass, field, replace
from datetime import UTC, datetime
from functools import partial
from typing import Any, Protocol, TypeAlias

from ..core.clock import utc_now_iso
from ..errors import KiwiError, RegistryUnavailable, UsageError
from ..principal import Principal, acting_as, requested
from ..registry.base import Registry, Rows
from .journal import Journal

# A record, or the function that makes it (called by the writer, off the run's path).
Record: TypeAlias = dict[str, Any] | Callable[[], dict[str, Any]]

MAX_BATCH = 500
# How long the writer lets records gather before a write, unless flushed: runs that
# follow one another then share a round trip instead of paying one each.
GATHER_S = 0.1
# While the registry is unreachable: the first wait before writing again, the longest,
# how long a record is kept before it is reported lost, and how many are kept at most.
RETRY_S = 0.5
RETRY_MAX_S = 15.0
KEEP_S = 120.0
MAX_WAITING = 50_000
DUPLICATE_ID = "23505"
# Anonymous audit rows: a budget per minute shared by every anonymous caller; a batch
# beyond it is refused whole (OVER_BUDGET), so anonymous batches stay small.
ANON_BATCH = 50
OVER_BUDGET = "PT429"
# A function the registry does not have (a database from before it): 42883, or PostgREST's PGRST202.
MISSING_FUNCTION = ("42883", "PGRST202")


@dataclass(slots=True)
class _Queued:
    record_id: str  # the id it is stored under (chosen here, so a repeated write is known)
    record: Record
    principal: Principal | None  # whom the run acted as (None: the registry's own principal)
    kind: str  # "run" | "audit"
    queued_at: float = field(default_factory=time.time)
    failed_at: float | None = None  # when a write first failed for want of the registry (it may have landed)
    segment: int | None = None  # the journal segment holding it (journal.py), if journaled
    text: str | None = None  # the record's JSON as journaled (sent as it is), while the record is that


def _dict(queued: _Queued) -> dict[str, Any]:
    """A queued record once made (the writer makes each before writing it)."""
    assert isinstance(queued.record, dict)
    return queued.record


def _rows(batch: list[_Queued]) -> Rows:
    """A batch's records to write, with their JSON array text when every one was journaled."""
    rows = Rows(_dict(q) for q in batch)
    texts = [q.text for q in batch if q.text is not None]
    if len(texts) == len(batch):
        rows.json = f"[{','.join(texts)}]"
    return rows


def _waiting(item: _Queued, *, now: float) -> _Queued:
    """`item` marked as having failed for want of the registry (since `now`, if not before);
    an audit row is given the time it was queued, or the database would give it the time it
    is at last written."""
    item = replace(item, failed_at=now if item.failed_at is None else item.failed_at)
    if item.kind == "audit" and "at" not in _dict(item):
        at = datetime.fromtimestamp(item.queued_at, UTC).isoformat()
        item = replace(item, record={**_dict(item), "at": at}, text=None)  # no longer the journaled text
    return item


class RecordSink(Protocol):
    """Who writes a run's record and its audit row instead of the runner's recorder: a queued
    run's worker, which writes them with the run's result in one transaction."""

    def run(self, record: dict[str, Any]) -> None: ...

    def audit(self, entry: dict[str, Any]) -> None: ...


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
        raw = bytearray(self._block[at : at + 16])
        raw[6] = (raw[6] & 0x0F) | 0x40  # version 4
        raw[8] = (raw[8] & 0x3F) | 0x80  # RFC 4122 variant: what uuid.UUID(bytes=..., version=4) sets
        x = raw.hex()
        return f"{x[:8]}-{x[8:12]}-{x[12:16]}-{x[16:20]}-{x[20:]}"


class RunRecorder:
    def __init__(
        self, registry: Registry, on_error: Callable[[str], None] | None = None, journal: Journal | None = None
    ) -> None:
        self._registry = registry
        self._journal = journal
        self._adopted = journal is None
        self._on_error = on_error
        self._pending: list[_Queued] = []
        self._writer: asyncio.Task[None] | None = None
        self.written = 0
        self.lost = 0
        self._hurry = asyncio.Event()
        self._new_id = RunIds()
        self._retry_s = RETRY_S
        self._retry_at = 0.0  # loop time before which nothing is written (the registry was unreachable)
        self._unreachable = ""  # why, the last time
        self._together = True  # runs and audit rows in one call (record_calls), while the registry has it
        with contextlib.suppress(RuntimeError):  # made inside a running loop: replay the journal now
            asyncio.get_running_loop()
            self._adopt()

    @property
    def waiting(self) -> int:
        """How many records are kept because the registry was unreachable."""
        return sum(q.failed_at is not None for q in self._pending)

    def submit(self, record: Record, run_id: str | None = None, *, audit: dict[str, Any] | None = None) -> str:
        """Queue a record (or the function that makes it); return the id it will be stored under
        (`run_id` when the run chose it already: a checkpoint names it, harness/checkpoint.py).
        audit: the call's audit row, queued with it (journaled in the same line)."""
        run_id = run_id or (None if callable(record) else record.get("id")) or self._new_id()
        principal = requested()
        run = _Queued(run_id, record, principal, "run")
        if audit is None:
            self._queue(run)
        else:
            self._queue(run, self._audit_item(audit, principal))
        return run_id

    def new_id(self) -> str:
        """An id for a run record chosen before it is submitted (its audit row names it)."""
        return self._new_id()

    def submit_audit(self, entry: dict[str, Any]) -> None:
        """Queue an audit row (public.audit_log), written like the run records, as its caller."""
        self._queue(self._audit_item(entry, requested()))

    def _audit_item(self, entry: dict[str, Any], principal: Principal | None) -> _Queued:
        if self._journal is not None and "at" not in entry:  # journaled: it may be written much later
            entry = {**entry, "at": utc_now_iso()}
        return _Queued(entry.get("id") or self._new_id(), entry, principal, "audit")

    def close(self) -> None:
        """Close the journal (after a flush): what the registry has not stored stays on disk."""
        if self._journal is not None:
            self._journal.close()

    def _journaled(self, items: tuple[_Queued, ...]) -> list[_Queued]:
        """The records made and on disk, in one journal line (those whose making failed are
        reported, and left out)."""
        assert self._journal is not None
        made: list[tuple[_Queued, dict[str, Any]]] = []
        for item in items:  # each made now, in place: the items are the recorder's own
            record = self._record_of(item)
            if record is not None:
                item.record = record
                made.append((item, record))
        if not made:
            return []
        segment, texts = self._journal.append_texts(
            items[0].principal, [(item.record_id, item.kind, record) for item, record in made]
        )
        for (item, _), text in zip(made, texts, strict=True):
            item.segment, item.text = segment, text
        return [item for item, _ in made]

    def _adopt(self) -> None:
        """Queue the records a process of this registry left in the journal (once)."""
        if self._adopted or self._journal is None:
            return
        self._adopted = True
        now = time.monotonic()
        for found in self._journal.adopt():
            # it may have been stored before its process ended: its id will say (23505)
            item = _Queued(found.record_id, found.record, found.principal, found.kind, failed_at=now)
            self._pending.append(replace(item, segment=found.segment))
        if self._pending and (self._writer is None or self._writer.done()):
            self._writer = asyncio.get_running_loop().create_task(self._write())

    def _queue(self, *items: _Queued) -> None:
        """Queue one call's records (one principal's), journaled first when there is a journal."""
        if self._journal is not None:
            self._adopt()
            if self._journal.enabled:
                items = tuple(self._journaled(items))
        if not items:
            return
        self._pending.extend(items)
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
                await self._gather()
                queued, self._pending = self._pending[:MAX_BATCH], self._pending[MAX_BATCH:]
                groups: dict[Principal | None, tuple[list[_Queued], list[_Queued]]] = {}
                for item in queued:
                    runs, audits = groups.setdefault(item.principal, ([], []))
                    (runs if item.kind == "run" else audits).append(item)
                unreachable: list[_Queued] = []
                for principal, (runs, audits) in groups.items():
                    with acting_as(principal):
                        unreachable += await self._write_theirs(principal, runs, audits)
                self._keep(unreachable)
        finally:
            self._hurry.clear()

    async def _gather(self) -> None:
        """Wait for more records (GATHER_S) and, after the registry was unreachable, until the
        next attempt is due; a flush cuts either short."""
        if self._hurry.is_set():
            return
        wait = max(self._retry_at - asyncio.get_running_loop().time(), 0.0)
        if len(self._pending) < MAX_BATCH:
            wait = max(wait, GATHER_S)
        if wait > 0:
            with contextlib.suppress(TimeoutError):
                await asyncio.wait_for(self._hurry.wait(), wait)

    async def _write_theirs(
        self, principal: Principal | None, runs: list[_Queued], audits: list[_Queued]
    ) -> list[_Queued]:
        """One caller's records (at most MAX_BATCH in all), made now: runs and audit rows in one
        round trip (record_calls) when there are both, else each kind in its own batches (an
        anonymous caller's audit rows in batches of ANON_BATCH). Returns what to write again."""
        made_runs = [q for q in map(self._made, runs) if q is not None]
        made_audits = [q for q in map(self._made, audits) if q is not None]
        anonymous = principal is not None and principal.role == "anon"
        if made_runs and made_audits and not anonymous and self._together:
            return await self._write_calls(made_runs, made_audits)
        again: list[_Queued] = []
        size = ANON_BATCH if anonymous else MAX_BATCH
        for kind, made in (("run", made_runs), ("audit", made_audits)):
            for at in range(0, len(made), size):
                again += await self._write_batch(kind, made[at : at + size])
        return again

    async def _write_calls(self, runs: list[_Queued], audits: list[_Queued]) -> list[_Queued]:
        """Runs and audit rows in one call (record_calls), all or nothing; refused, each kind is
        written on its own (one bad record, or one an unanswered write did store, is then found
        as before). A registry without record_calls is written to kind by kind from then on."""
        try:
            await self._registry.record_calls(_rows(runs), _rows(audits))
        except RegistryUnavailable as e:
            if e.sqlstate in MISSING_FUNCTION:  # a registry from before record_calls
                self._together = False
                return await self._write_batch("run", runs) + await self._write_batch("audit", audits)
            self._unreachable = e.message
            return runs + audits
        except KiwiError as e:
            if e.sqlstate == OVER_BUDGET:
                self._unreachable = e.message
                return runs + audits
            return await self._write_batch("run", runs) + await self._write_batch("audit", audits)
        self.written += len(runs) + len(audits)
        self._stored(runs + audits)
        return []

    async def _write_batch(self, kind: str, batch: list[_Queued]) -> list[_Queued]:
        """Write `batch` in one call; return what to write again later (the registry was unreachable)."""
        if not batch:
            return []
        write = self._registry.record_runs if kind == "run" else self._registry.record_audits
        try:
            await write(_rows(batch))
        except RegistryUnavailable as e:  # kept, in memory and in the journal
            self._unreachable = e.message
            return batch
        except KiwiError as e:
            if e.sqlstate == OVER_BUDGET:  # anonymous rows beyond this minute's budget: kept, as above
                self._unreachable = e.message
                return batch
            if len(batch) > 1 and (isinstance(e, UsageError) or e.sqlstate == DUPLICATE_ID):
                # one bad record, or one an unanswered write did store, refuses its batch:
                # write them one by one, losing only the bad one
                again: list[_Queued] = []
                for item in batch:
                    again += await self._write_batch(kind, [item])
                return again
            if e.sqlstate == DUPLICATE_ID and all(q.failed_at is not None for q in batch):
                self.written += len(batch)  # stored by an earlier write whose answer was lost
            else:
                self._report(kind, [_dict(q) for q in batch], e.message)
            self._stored(batch)  # stored, or refused for good: the journal need not keep it
            return []
        self.written += len(batch)
        self._stored(batch)
        return []

    def _stored(self, batch: list[_Queued]) -> None:
        if self._journal is not None:
            for item in batch:
                self._journal.stored(item.segment)

    def _keep(self, unreachable: list[_Queued]) -> None:
        """Queue again, before newer records, what the registry could not be reached for, and
        wait longer before the next attempt; report lost what has waited KEEP_S, everything
        when flushing (a flush tries once more, and no longer), and the oldest beyond MAX_WAITING."""
        if not unreachable:
            self._retry_s, self._retry_at = RETRY_S, 0.0
            return
        now = time.monotonic()
        flushing = self._hurry.is_set()
        kept: list[_Queued] = []
        expired: list[_Queued] = []
        for item in map(partial(_waiting, now=now), unreachable):
            (expired if flushing or now - (item.failed_at or now) >= KEEP_S else kept).append(item)
        when = "at the flush" if flushing else f"for {KEEP_S:.0f} s"
        self._report_all(expired, f"the registry was still unreachable {when}: {self._unreachable}")
        self._pending[:0] = kept
        excess = len(self._pending) - MAX_WAITING
        if excess > 0:
            dropped, self._pending = self._pending[:excess], self._pending[excess:]
            self._report_all(dropped, f"more than {MAX_WAITING} records were waiting for the registry")
        self._retry_at = asyncio.get_running_loop().time() + self._retry_s
        self._retry_s = min(self._retry_s * 2, RETRY_MAX_S)

    def _report_all(self, items: list[_Queued], why: str) -> None:
        """Report `items` lost, one message per kind (journaled, they stay on disk for the next start)."""
        if self._journal is not None and self._journal.enabled and items:
            why += f"; kept in the journal {self._journal.directory} for the next start"
        for kind in ("run", "audit"):
            theirs = [_dict(q) for q in items if q.kind == kind]
            if theirs:
                self._report(kind, theirs, why)

    def _made(self, queued: _Queued) -> _Queued | None:
        """The queued record made (if it was queued as a function), under its id."""
        if isinstance(queued.record, dict) and queued.record.get("id") == queued.record_id:
            return queued  # made already (journaled)
        record = self._record_of(queued)
        return None if record is None else replace(queued, record=record)

    def _record_of(self, queued: _Queued) -> dict[str, Any] | None:
        """The record made (if it was queued as a function), under its id; None: making it
        failed, which is reported."""
        record = queued.record
        try:
            if callable(record):  # a record made here is this recorder's: its id is set in place
                made = record()
                made["id"] = queued.record_id
                return made
            return {**record, "id": queued.record_id}
        except Exception as e:  # a bug in what makes the record: say so, keep writing the others
            self._report(queued.kind, [{"id": queued.record_id}], f"the record could not be made: {e!r}")
            self._stored([queued])
            return None

    def _report(self, kind: str, batch: list[dict[str, Any]], why: str) -> None:
        self.lost += len(batch)
        if self._on_error:
            what = "run record(s)" if kind == "run" else "audit row(s)"
            self._on_error(f"{len(batch)} {what} not saved ({batch[0].get('tool_id')}…): {why}")
