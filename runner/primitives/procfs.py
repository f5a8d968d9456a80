"""Linux's /proc, read one way: a process's state, parent, group, session, children, pipes and argv.

The runner needs it where signals cannot tell: a zombie still answers kill(pid, 0), and
under an init that never reaps, it answers forever. Tests and benchmarks read the same.
"""

from __future__ import annotations

import os
from collections.abc import Iterator
from dataclasses import dataclass


@dataclass(frozen=True)
class ProcStat:
    pid: int
    name: str
    state: str  # R, S, D, Z (zombie), X (dead) ...
    ppid: int
    pgrp: int
    utime: int  # clock ticks
    stime: int
    session: int = 0
    starttime: int = 0  # clock ticks after boot: with pid, names one process even once pids are reused

    @property
    def alive(self) -> bool:
        """Running or able to run: a zombie only waits to be reaped."""
        return self.state not in ("Z", "X")


def stat(pid: int) -> ProcStat | None:
    """The process's /proc/<pid>/stat, or None when it is gone (or cannot be read)."""
    try:
        with open(f"/proc/{pid}/stat", "rb") as f:
            raw = f.read()
    except OSError:
        return None
    end = raw.rfind(b")")  # the name is in parentheses and may hold anything, ")" included
    fields = raw[end + 2 :].split()
    try:
        return ProcStat(
            pid=pid,
            name=raw[raw.find(b"(") + 1 : end].decode(errors="replace"),
            state=fields[0].decode(),
            ppid=int(fields[1]),
            pgrp=int(fields[2]),
            utime=int(fields[11]),
            stime=int(fields[12]),
            session=int(fields[3]),
            starttime=int(fields[19]),
        )
    except (IndexError, ValueError):
        return None


def processes() -> Iterator[ProcStat]:
    """Every process this one can see. Raises OSError when there is no /proc."""
    for name in os.listdir("/proc"):
        if name.isdigit() and (entry := stat(int(name))) is not None:
            yield entry


def cmdline(pid: int) -> list[str] | None:
    """The process's argv, or None when it is gone."""
    try:
        with open(f"/proc/{pid}/cmdline", "rb") as f:
            return [a.decode(errors="replace") for a in f.read().split(b"\0")[:-1]]
    except OSError:
        return None


def children(pid: int) -> set[int]:
    """The process's children, from every thread (a child belongs to the thread that forked it,
    an adopted orphan to whichever thread the kernel picked). Empty when it is gone."""
    found: set[int] = set()
    try:
        tasks = os.listdir(f"/proc/{pid}/task")
    except OSError:
        return found
    for tid in tasks:
        try:
            with open(f"/proc/{pid}/task/{tid}/children", "rb") as f:
                found.update(int(c) for c in f.read().split())
        except (OSError, ValueError):
            continue
    return found


def pipes(pid: int) -> set[int]:
    """The inodes of the pipes the process holds open (a descendant keeps its parent's stdout)."""
    found: set[int] = set()
    try:
        fds = os.listdir(f"/proc/{pid}/fd")
    except OSError:
        return found
    for fd in fds:
        try:
            target = os.readlink(f"/proc/{pid}/fd/{fd}")
        except OSError:
            continue
        if target.startswith("pipe:["):
            found.add(int(target[6:-1]))
    return found
