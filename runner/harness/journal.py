"""Run records and audit rows on local disk until the registry has them.

The recorder (recorder.py) writes records behind the reply, so a process killed right after
answering would take its queued records with it. Each record is therefore appended to this
journal before the call returns (one `write` to a file opened O_APPEND: it is in the
kernel's page cache, so a killed process loses nothing; a machine that loses power may
lose what the kernel had not yet flushed, as no fsync is made). Once the registry has
stored a record, its line is no longer needed: a journal segment whose records are all
stored is emptied (or deleted, once a newer one is in use).

    <cache_dir>/journal/<registry key>/<pid>-<n>.jsonl     one JSON line per record:
        {"id", "kind": "run" | "audit", "as": {"role", "claims", "source"} | null, "record"}

The registry key is a digest of where the records go (the backend's repr: its database URL
with the password masked), so a journal is only ever replayed into the registry it was
written for. Every segment is held with an exclusive flock by the process writing it; a
segment whose lock can be taken belongs to a process that ended without emptying it (it
was killed, or the registry was unreachable until it stopped). `adopt()` reads such
segments, for the recorder to write their records again under the ids they were given
(a record the registry already has is known by its id, and not stored twice), appends
them to this process's own segment, and deletes the orphan.

The principal a record was written as is kept as its role and claims, never its token:
the Postgres backend acts on claims, so a replayed record names the same caller. The
files are created 0600 in the user's own cache directory.
"""

from __future__ import annotations

import contextlib
import fcntl
import hashlib
import json
import logging
import os
from dataclasses import dataclass, replace
from pathlib import Path
from typing import Any

from ..principal import Principal

__all__ = ["Journal", "Journaled", "journal_for"]

logger = logging.getLogger("kiwi.runner")

ROTATE_LINES = 2000  # a segment still holding unwritten records is replaced after this many lines


@dataclass(frozen=True)
class Journaled:
    """A record read back from an orphaned segment."""

    record_id: str
    kind: str
    principal: Principal | None
    record: dict[str, Any]
    segment: int | None = None  # where this process's journal now holds it


# The backends whose records outlive the process (their repr names the registry: a database
# URL with its password masked). Only Postgres: it acts on a record's role and claims, so a
# replayed record is written as the caller who made it. The REST backend needs the caller's
# token, which is never kept, so it would write a replayed record as somebody else (or not at
# all); its records stay in memory, as before. A registry in memory has none.
JOURNALED_BACKENDS = ("PostgresBackend",)


def journal_for(cache_dir: Path, backend: Any) -> Journal | None:
    """The journal of the registry `backend` writes to, under the cache directory (None: a
    backend whose records are not kept, such as the in-memory one of unit tests)."""
    if type(backend).__name__ not in JOURNALED_BACKENDS:
        return None
    return Journal(Path(cache_dir) / "journal" / hashlib.sha256(repr(backend).encode()).hexdigest()[:16])


def _principal_json(principal: Principal | None) -> dict[str, Any] | None:
    if principal is None:
        return None
    return {"role": principal.role, "claims": dict(principal.claims), "source": principal.source}


def _principal_of(data: Any) -> Principal | None:
    if not isinstance(data, dict):
        return None
    return Principal(str(data["role"]), dict(data.get("claims") or {}), str(data.get("source") or "journal"))


class _Segment:
    """One journal file, locked by this process for as long as it is open."""

    def __init__(self, path: Path) -> None:
        self.path = path
        self.fd = os.open(path, os.O_WRONLY | os.O_APPEND | os.O_CREAT, 0o600)
        fcntl.flock(self.fd, fcntl.LOCK_EX | fcntl.LOCK_NB)
        self.lines = 0
        self.outstanding = 0

    def close(self, *, delete: bool) -> None:
        if delete:
            with contextlib.suppress(FileNotFoundError):
                self.path.unlink()
        os.close(self.fd)


class Journal:
    def __init__(self, directory: Path) -> None:
        self.directory = directory
        self._segments: dict[int, _Segment] = {}
        self._current = -1
        self._broken = False

    @property
    def enabled(self) -> bool:
        return not self._broken

    def append(self, record_id: str, kind: str, principal: Principal | None, record: dict[str, Any]) -> int | None:
        """Put the record on disk before the call returns; the segment it is in (None: not journaled,
        the disk refused; the record is then only in memory, as before, and that is logged once)."""
        if self._broken:
            return None
        line = {"id": record_id, "kind": kind, "as": _principal_json(principal), "record": record}
        data = (json.dumps(line, separators=(",", ":"), default=str) + "\n").encode()
        try:
            segment = self._writable()
            os.write(segment.fd, data)
        except OSError as e:
            self._broken = True
            logger.warning("the run journal in %s cannot be written (%s): records only in memory", self.directory, e)
            return None
        segment.lines += 1
        segment.outstanding += 1
        return self._current

    def stored(self, segment: int | None) -> None:
        """One record of `segment` is in the registry (or will never be: refused for good)."""
        found = self._segments.get(segment) if segment is not None else None
        if found is None:
            return
        found.outstanding -= 1
        if found.outstanding > 0:
            return
        if segment == self._current:
            with contextlib.suppress(OSError):  # all of it stored: start it again from empty
                os.ftruncate(found.fd, 0)
                found.lines = 0
        else:
            found.close(delete=True)
            del self._segments[segment]

    def adopt(self) -> list[Journaled]:
        """The records of segments no running process holds (their writer ended first), read
        and removed from disk after they are appended to this process's own segment."""
        if self._broken or not self.directory.is_dir():
            return []
        mine = {s.path for s in self._segments.values()}
        found: list[Journaled] = []
        for path in sorted(self.directory.glob("*.jsonl")):
            if path in mine:
                continue
            try:
                fd = os.open(path, os.O_RDWR)
            except FileNotFoundError:
                continue  # adopted by another process meanwhile
            try:
                try:
                    fcntl.flock(fd, fcntl.LOCK_EX | fcntl.LOCK_NB)
                except BlockingIOError:
                    continue  # its writer is alive
                theirs = [
                    replace(item, segment=self.append(item.record_id, item.kind, item.principal, item.record))
                    for item in _read(path)
                ]
                if not self._broken:
                    path.unlink(missing_ok=True)
                found += theirs
            finally:
                os.close(fd)
        return found

    def close(self) -> None:
        """Close the segments; empty ones are deleted, the others stay for the next start."""
        for segment in self._segments.values():
            segment.close(delete=segment.outstanding == 0)
        self._segments.clear()

    def _writable(self) -> _Segment:
        current = self._segments.get(self._current)
        if current is not None and (current.lines < ROTATE_LINES or current.outstanding == 0):
            return current
        self.directory.mkdir(parents=True, exist_ok=True, mode=0o700)
        previous = self._current
        self._current += 1
        while True:
            path = self.directory / f"{os.getpid()}-{self._current}.jsonl"
            if not path.exists():
                break
            self._current += 1  # left by an earlier process of the same pid
        self._segments[self._current] = _Segment(path)
        if current is not None and current.outstanding == 0:
            current.close(delete=True)
            del self._segments[previous]
        return self._segments[self._current]


def _read(path: Path) -> list[Journaled]:
    """The complete lines of a segment (a line cut short by the crash is skipped)."""
    found = []
    for raw in path.read_bytes().splitlines():
        try:
            line = json.loads(raw)
            found.append(Journaled(str(line["id"]), str(line["kind"]), _principal_of(line.get("as")), line["record"]))
        except (ValueError, KeyError, TypeError):
            logger.warning("skipped an unreadable line of the run journal %s", path)
    return found
