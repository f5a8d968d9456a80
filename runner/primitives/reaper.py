"""No process outlives its run: the runner adopts orphans and kills each run's descendants.

A process group is not enough: `setsid` (or a daemonising double fork) leaves the group,
and when its parent exits, init adopts it, out of the runner's reach. So the runner makes
itself the *child subreaper* (Linux prctl PR_SET_CHILD_SUBREAPER): orphaned descendants
are reparented to it instead. Each spawned process gets a Watch that keeps track of every
process seen in its tree while it runs and claims the runner's adopted children that are
its own, so that at the end of the run (exit, timeout, cancellation) and at interpreter
exit it SIGKILLs each of them and reaps the zombies it adopted; after every run it reaps
what has exited of the orphans no run claimed (reap_exited_orphans). It never touches a
concurrent run's processes, nor children the runner spawned itself and awaits (a run's root,
asyncio's, MCP servers: childwatch.started).

An adopted orphan is a run's when, most certain first: it (pid and start time) was seen in
the run's tree; its process group or session was started by a process seen there; it still
holds the run's stdout or stderr pipe. An orphan none of these place but whose session
leader is gone (a daemon that closed its pipes and whose parents exited before a poll saw
it) belongs to the run that ends while no other run that began before it is active.

Elsewhere than Linux all of this is a no-op: the process group is the only reach there.
"""

from __future__ import annotations

import asyncio
import atexit
import contextlib
import ctypes
import os
import signal
import sys
import time
from collections.abc import Iterable

from . import childwatch, procfs

PR_SET_CHILD_SUBREAPER = 36
POLL_S = 0.05  # how often a running tree is looked at (what it forks and leaves behind)
FIRST_POLL_S = 0.005  # a tree given its start time is first looked at once its root has had time to exec
_ROUNDS = 50  # kill rounds: a process that forks while being killed leaves children to the next
_REAP_S = 1.0  # how long to wait for a killed adopted process to become a zombie we can reap

Killed = tuple[int, str]  # pid, command name

_subreaper: bool | None = None
_active: set[Watch] = set()


def become_subreaper() -> bool:
    """Make this process the reaper of its orphaned descendants, once. False where the
    platform has no such thing (anything but Linux) or refuses it."""
    global _subreaper
    if _subreaper is None:
        _subreaper = False
        if sys.platform.startswith("linux"):
            with contextlib.suppress(OSError, AttributeError):
                libc = ctypes.CDLL(None, use_errno=True)
                _subreaper = libc.prctl(PR_SET_CHILD_SUBREAPER, 1, 0, 0, 0) == 0
        if _subreaper:
            atexit.register(_kill_all_at_exit)
    return _subreaper


def supported() -> bool:
    """Whether descendants can be found at all (Linux with /proc and a subreaper)."""
    return become_subreaper() and os.path.isdir("/proc/self/task")


def ticks_now() -> int:
    """Now, in the clock of /proc/<pid>/stat's start times (clock ticks of CLOCK_BOOTTIME): taken
    before a spawn, a start time that no process of that spawn can precede."""
    return time.clock_gettime_ns(time.CLOCK_BOOTTIME) * os.sysconf("SC_CLK_TCK") // 1_000_000_000


class Watch:
    """One spawned process's tree: what it is now, what it has been, what is left of it."""

    def __init__(self, root: int, pipes: Iterable[int] = (), started: int | None = None) -> None:
        """`started`: ticks_now() taken before `root` was spawned. Given, the root is not read
        now: a child still in its exec makes a read of its /proc/<pid>/stat wait for the exec
        to end (0.1-1 ms on the reply path); the first look at the tree, FIRST_POLL_S later,
        records it, and until then `started` stands in for its start time."""
        self.root = root
        self.pipes = set(pipes)
        self.enabled = supported()
        self.seen: dict[int, int] = {}  # pid -> start time, of every process seen in the tree
        self._live: set[int] = set()  # where the next walk starts: what the last one found
        self._swept: dict[int, procfs.ProcStat] = {}  # what the last sweep found
        self._poller: asyncio.Handle | None = None
        first = 0.0
        if started is not None and self.enabled:
            self.started = started
            self._live.add(root)
            first = FIRST_POLL_S
        else:
            me = procfs.stat(root) if self.enabled else None
            self.started = me.starttime if me else 0
            if me is not None:  # else it is gone (and maybe reaped: its pid means nothing now)
                self.seen[root] = me.starttime
                self._live.add(root)
        if self.enabled:
            _active.add(self)
            self._loop = asyncio.get_running_loop()
            self._poller = self._loop.call_later(first, self._poll)  # a timer, not a task: one less per run

    def _poll(self) -> None:
        """Look at the tree now and again every POLL_S until closed."""
        self.members()
        self._poller = self._loop.call_later(POLL_S, self._poll)

    def members(self, extra: Iterable[int] = ()) -> dict[int, procfs.ProcStat]:
        """Every process of the run now (zombies included), remembering each as seen; `extra`
        are more processes to count in, with their descendants."""
        if not self.enabled:
            return {}
        found: dict[int, procfs.ProcStat] = {}
        queue = [p for p in (*self._live, *self._claimed(), *extra) if p != os.getpid()]
        while queue:
            pid = queue.pop()
            if pid in found or (entry := procfs.stat(pid)) is None:
                continue
            if pid in self.seen and self.seen[pid] != entry.starttime:
                continue  # the pid was reused by a process of someone else
            unread_root = pid == self.root and pid not in self.seen
            if unread_root and (entry.ppid != os.getpid() or entry.starttime < self.started):
                continue  # the root, read for the first time, is no longer ours (reaped, its pid taken)
            found[pid] = entry
            self.seen.setdefault(pid, entry.starttime)
            queue.extend(procfs.children(pid))
        self._live = set(found)
        return found

    def owns(self, entry: procfs.ProcStat) -> bool:
        """Whether an adopted process is this run's (see the module's docstring)."""
        if self.seen.get(entry.pid) == entry.starttime:
            return True
        for leader in (entry.pgrp, entry.session):  # a group or session begun in the run
            since = self.seen.get(leader, (self.started or None) if leader == self.root else None)  # root: not read yet
            if leader != entry.pid and since is not None and entry.starttime >= since:
                return True
        return bool(self.pipes) and entry.alive and not self.pipes.isdisjoint(procfs.pipes(entry.pid))

    def _claimed(self) -> list[int]:
        roots = {w.root for w in _active}
        return [e.pid for e in _adopted() if e.pid not in roots and self.owns(e)]

    def _strays(self) -> list[int]:
        """Adopted orphans nobody owns, whose session leader is gone, that only this run can
        have left: no other active run began before them."""
        if not self.started:
            return []
        others = [w for w in _active if w is not self]
        roots = {w.root for w in _active}
        out = []
        for e in _adopted():
            if e.pid in roots or e.session == e.pid or e.session == os.getsid(0) or e.starttime < self.started:
                continue
            if any(w.owns(e) or (w.started and w.started <= e.starttime) for w in others):
                continue
            out.append(e.pid)
        return out

    def _sweep(self) -> list[procfs.ProcStat]:
        """SIGKILL every live process of the run once; what was signalled."""
        found = self._swept = self.members(self._strays())
        hit = []
        for pid, entry in found.items():
            if pid == self.root and not entry.alive:
                continue
            if entry.alive:
                with contextlib.suppress(ProcessLookupError, PermissionError):
                    os.kill(pid, signal.SIGKILL)
                    hit.append(entry)
            else:
                _reap(entry)
        return hit

    async def kill(self) -> list[Killed]:
        """Kill what is left of the run and reap what the runner adopted of it."""
        killed: dict[int, str] = {}
        for round_ in range(_ROUNDS):
            hit = self._sweep()
            if not hit and round_ == 0 and not (self._swept.keys() - {self.root}):
                return []  # the common case: nothing but the (reaped) root was ever left to sweep
            if not hit:
                break
            killed.update((e.pid, e.name) for e in hit)
            await asyncio.sleep(0.005)
        deadline = time.monotonic() + _REAP_S
        while self._reap_members() and time.monotonic() < deadline:
            await asyncio.sleep(0.01)
        return sorted(killed.items())

    def kill_now(self) -> list[Killed]:
        """kill() without awaiting: for cancellation and interpreter exit."""
        killed: dict[int, str] = {}
        for _ in range(_ROUNDS):
            hit = self._sweep()
            if not hit:
                break
            killed.update((e.pid, e.name) for e in hit)
            time.sleep(0.002)
        self._reap_members()
        return sorted(killed.items())

    def _reap_members(self) -> bool:
        """Reap the run's adopted zombies; whether an adopted process is still not reaped."""
        waiting = False
        for pid, entry in self.members().items():
            if pid != self.root and entry.ppid == os.getpid():
                waiting = not _reap(entry) or waiting
        return waiting

    def close(self) -> None:
        if self._poller is not None:
            self._poller.cancel()
        _active.discard(self)


def _adopted() -> list[procfs.ProcStat]:
    """The runner's children (spawned or adopted alike)."""
    entries = (procfs.stat(pid) for pid in procfs.children(os.getpid()))
    return [e for e in entries if e is not None and e.ppid == os.getpid()]


def reap_exited_orphans() -> None:
    """Reap the adopted orphans of other sessions that have exited, whichever run left them.

    A daemon's double fork leaves the `setsid` child that started it, exited before any look at
    the run's tree saw it; a sandboxed run that left a process behind leaves bubblewrap's inner
    processes, which outlive its outer one (it exits with the command) and are adopted after
    the run has ended. No run claims them, and unreaped, each such run left a zombie for the
    life of the server: a tenant repeating it could fill the process table. Called at the end
    of every spawn, so what one run leaves the next reaps at the latest.

    Never taken: a child in this process's own session (one it started without a session of
    its own, whose waiter reaps it) and one it started in a session of its own and awaits on
    the loop (a run's root, an MCP server: childwatch.started)."""
    if not _any_exited_child():  # the common case: one system call
        return
    mine, me = os.getsid(0), os.getpid()
    for pid in procfs.children(me):
        # a child awaited on the loop is not read at all: with concurrent runs, most children
        # are, and reading the stat of one still in its exec waits for the exec to end
        if childwatch.is_started(pid) or (entry := procfs.stat(pid)) is None:
            continue
        if entry.ppid == me and not entry.alive and entry.session != mine:
            _reap(entry)


def _any_exited_child() -> bool:
    """Whether a child of this process has exited and waits to be reaped (reaps nothing)."""
    try:
        return os.waitid(os.P_ALL, 0, os.WEXITED | os.WNOHANG | os.WNOWAIT) is not None
    except ChildProcessError:
        return False


def _reap(entry: procfs.ProcStat) -> bool:
    """waitpid an adopted zombie (only ever a pid we claimed, never asyncio's own child);
    whether it is reaped (or gone)."""
    if entry.ppid != os.getpid():
        return True
    if entry.alive:
        return False
    try:
        pid, _ = os.waitpid(entry.pid, os.WNOHANG)
    except ChildProcessError:
        return True
    return pid != 0


def describe(killed: list[Killed] | tuple[Killed, ...], which: str = "", limit: int = 8) -> str:
    """'killed 3 processes: 12 bash, 13 sleep, 14 sleep' (the first `limit` named)."""
    names = ", ".join(f"{pid} {name}" for pid, name in killed[:limit])
    more = f" and {len(killed) - limit} more" if len(killed) > limit else ""
    noun = "process" if len(killed) == 1 else "processes"
    return f"killed {len(killed)} {noun}{which}: {names}{more}"


def _kill_all_at_exit() -> None:
    """At interpreter exit, no run's process stays behind (runs cut short, adopted strays)."""
    for watch in list(_active):
        with contextlib.suppress(Exception):
            watch.kill_now()
        _active.discard(watch)
