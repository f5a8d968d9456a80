"""How asyncio learns that a child exited: a pidfd on the event loop, not a thread per child.

Python 3.11's default child watcher starts a thread for every process spawned, which blocks in
waitpid and calls back into the loop: a thread start and two GIL hand-overs a run, which on a
busy machine cost more than the rest of starting the process. Linux (5.3+) gives each child a
pid file descriptor that becomes readable when it exits; the loop watches it like a socket.
Python 3.12 does exactly this by default. `install()` does it on 3.11, once, and only where
the default watcher would otherwise be used (never replacing one an embedder chose).

The child is still waited for by its pid alone (waitpid(pid)), and noted as awaited
(started(), core/awaited.py) until then, so the runner's reaper, which reaps only the orphans
it adopted (reaper.py), and this never reap each other's processes. Children awaited
elsewhere (launch.watch_exit: a run's root, an MCP server; an egress proxy's Popen) are noted
the same way.
"""

from __future__ import annotations

import asyncio
import contextlib
import logging
import os
import sys
import warnings
from collections.abc import Callable
from typing import Any, TypeVarTuple

from ..core.awaited import forget, is_started, started

__all__ = ["forget", "install", "is_started", "reap", "started"]

logger = logging.getLogger("kiwi.runner")

_installed: bool | None = None
_Ts = TypeVarTuple("_Ts")


def install() -> bool:
    """Use pidfds for asyncio's children in this process, if it can and nobody chose otherwise;
    whether they are used (always on 3.12+, where asyncio does it itself)."""
    global _installed
    if _installed is None:
        _installed = sys.version_info >= (3, 12) or _replace_default_watcher()
    return _installed


def _replace_default_watcher() -> bool:
    if not sys.platform.startswith("linux") or not _pidfds_work():
        return False
    policy = asyncio.get_event_loop_policy()
    if type(policy) is not asyncio.DefaultEventLoopPolicy:  # uvloop's or an embedder's own
        return False
    with warnings.catch_warnings():
        warnings.simplefilter("ignore", DeprecationWarning)
        current = policy._watcher  # type: ignore[attr-defined]
        if current is not None and type(current) is not asyncio.ThreadedChildWatcher:
            return False  # someone chose a watcher: theirs it stays
        policy.set_child_watcher(PidfdWatcher())
    return True


def reap(pid: int) -> int:
    """Wait for the exited child `pid` (by its pid alone) and return its exit code (negative: the
    signal that ended it); 255 when something else reaped it first, as asyncio says then too."""
    forget(pid)
    try:
        _, status = os.waitpid(pid, 0)
    except ChildProcessError:
        logger.warning("child process %d was reaped elsewhere; its exit status is lost", pid)
        return 255
    return os.waitstatus_to_exitcode(status)


def _pidfds_work() -> bool:
    try:
        fd = os.pidfd_open(os.getpid())
    except (AttributeError, OSError):
        return False
    os.close(fd)
    return True


if sys.version_info < (3, 12):  # later Pythons do this themselves, and deprecate (then drop) watchers

    class PidfdWatcher(asyncio.AbstractChildWatcher):
        """A child watcher for whichever loop is running (asyncio's own PidfdChildWatcher of 3.11
        is tied to one loop; this is 3.12's, which is not)."""

        def __enter__(self) -> PidfdWatcher:
            return self

        def __exit__(self, *exc: object) -> None:
            return None

        def is_active(self) -> bool:
            return True

        def close(self) -> None:
            return None

        def attach_loop(self, loop: asyncio.AbstractEventLoop | None) -> None:
            return None

        def add_child_handler(self, pid: int, callback: Callable[[int, int, *_Ts], object], *args: *_Ts) -> None:
            loop = asyncio.get_running_loop()
            pidfd = os.pidfd_open(pid)
            started(pid)  # its waiter reaps it, never the reaper
            loop._add_reader(pidfd, self._exited, loop, pid, pidfd, callback, args)  # type: ignore[attr-defined]

        def remove_child_handler(self, pid: int) -> bool:
            return False  # asyncio never asks on Unix; the handler goes when the child does

        @staticmethod
        def _exited(
            loop: asyncio.AbstractEventLoop, pid: int, pidfd: int, callback: Callable[..., Any], args: tuple[Any, ...]
        ) -> None:
            loop._remove_reader(pidfd)  # type: ignore[attr-defined]
            try:
                returncode = reap(pid)
            finally:
                with contextlib.suppress(OSError):
                    os.close(pidfd)
            callback(pid, returncode, *args)
