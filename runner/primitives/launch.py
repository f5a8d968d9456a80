"""Starting a child and following its pipes and its exit on the event loop, without asyncio's
subprocess transports.

asyncio's `subprocess_exec` builds a transport, a transport and a protocol per pipe and a few
futures for every child, and connects them over several turns of the loop: measured here,
about 0.3 ms of CPU a spawn, half of what starting a child cost the runner. `launch` starts
the child with `subprocess.Popen` (vfork and exec, as asyncio itself does), reads its stdout
and stderr with `add_reader`, writes its stdin with `add_writer`, and learns of its exit from
a pidfd (Linux 5.3+; where there is none, a thread waits for it), handing all of it to the
same `Collector`. The child is waited for by its pid alone, as childwatch.py explains.
"""

from __future__ import annotations

import asyncio
import contextlib
import os
import subprocess
import threading
from collections.abc import Callable, Mapping
from pathlib import Path
from typing import IO

from .childwatch import reap, started
from .pipes import Collector

__all__ = ["Launched", "launch", "watch_exit"]

READ_BYTES = 256 * 1024  # at most per read, as asyncio's pipe transports read


class Launched:
    """A started child: its pid, its exit status once it is known, and its pipes on the loop."""

    def __init__(self, proc: subprocess.Popen[bytes], collector: Collector, stdin: bytes | None) -> None:
        self._proc = proc
        self._collector = collector
        self._loop = asyncio.get_running_loop()
        self._readers: dict[int, IO[bytes]] = {}
        self._stdin: IO[bytes] | None = None
        self._pending = memoryview(stdin or b"")
        for fd, pipe in ((1, proc.stdout), (2, proc.stderr)):
            if pipe is not None:
                os.set_blocking(pipe.fileno(), False)
                self._readers[fd] = pipe
                self._loop.add_reader(pipe.fileno(), self._read, fd)
        if proc.stdin is not None:
            self._stdin = proc.stdin
            os.set_blocking(proc.stdin.fileno(), False)
            self._write()
        watch_exit(proc, collector.process_exited)

    @property
    def pid(self) -> int:
        return self._proc.pid

    @property
    def returncode(self) -> int | None:
        return self._proc.returncode

    def pipe_inodes(self) -> set[int]:
        """The inodes of the child's stdout and stderr pipes: a descendant still holding one is the run's."""
        inodes = set()
        for pipe in self._readers.values():
            with contextlib.suppress(OSError, ValueError):
                inodes.add(os.fstat(pipe.fileno()).st_ino)
        return inodes

    def close(self) -> None:
        """Stop reading and writing (pipes an escaped process keeps open must not leak). The
        exit stays watched: a child still running is reaped when it ends."""
        for fd in list(self._readers):
            self._lost(fd)
        self._close_stdin()

    def _read(self, fd: int) -> None:
        pipe = self._readers.get(fd)
        if pipe is None:
            return
        try:
            data = os.read(pipe.fileno(), READ_BYTES)
        except (BlockingIOError, InterruptedError):
            return
        except OSError:
            data = b""
        if data:
            self._collector.pipe_data_received(fd, data)
        else:
            self._lost(fd)

    def _lost(self, fd: int) -> None:
        pipe = self._readers.pop(fd)
        self._loop.remove_reader(pipe.fileno())
        pipe.close()
        self._collector.pipe_connection_lost(fd, None)

    def _write(self) -> None:
        """Write what the child has not taken yet; close its stdin once all of it is written (or
        it stopped reading: a broken pipe is not an error of the run)."""
        assert self._stdin is not None
        try:
            while self._pending:
                written = os.write(self._stdin.fileno(), self._pending)
                self._pending = self._pending[written:]
        except (BlockingIOError, InterruptedError):
            self._loop.add_writer(self._stdin.fileno(), self._write_more)
            return
        except OSError:
            pass
        self._close_stdin()

    def _write_more(self) -> None:
        if self._stdin is not None:
            self._loop.remove_writer(self._stdin.fileno())
            self._write()

    def _close_stdin(self) -> None:
        if self._stdin is not None:
            self._loop.remove_writer(self._stdin.fileno())
            self._stdin.close()
            self._stdin = None


def watch_exit(proc: subprocess.Popen[bytes], on_exit: Callable[[], object]) -> None:
    """Call `on_exit` on the running loop once `proc` has exited and is reaped (its returncode
    set), learning of it from a pidfd on the loop; where there is none, a thread waits. Until
    then the reaper knows it as a child whose exit is awaited (childwatch.started)."""
    loop = asyncio.get_running_loop()
    started(proc.pid)
    try:
        pidfd = os.pidfd_open(proc.pid)
    except (AttributeError, OSError):
        threading.Thread(
            target=_wait_in_thread, args=(loop, proc, on_exit), daemon=True, name="kiwi-child-wait"
        ).start()
        return

    def exited() -> None:
        loop.remove_reader(pidfd)
        try:
            proc.returncode = reap(proc.pid)
        finally:
            os.close(pidfd)
        on_exit()

    loop.add_reader(pidfd, exited)


def _wait_in_thread(
    loop: asyncio.AbstractEventLoop, proc: subprocess.Popen[bytes], on_exit: Callable[[], object]
) -> None:
    proc.returncode = reap(proc.pid)
    with contextlib.suppress(RuntimeError):  # the loop closed first: nobody waits any more
        loop.call_soon_threadsafe(on_exit)


def launch(
    argv: list[str], *, env: Mapping[str, str], cwd: Path | None, stdin: bytes | None, collector: Collector
) -> Launched:
    """Start `argv` (argv[0] the program's path) in a new session, its stdin fed `stdin` then
    closed (None: /dev/null). Raises what Popen raises: OSError when it cannot start, ValueError
    for a NUL byte in argv or env."""
    proc = subprocess.Popen(
        argv,
        stdin=subprocess.DEVNULL if stdin is None else subprocess.PIPE,
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        env=env,
        cwd=cwd,
        bufsize=0,
        start_new_session=True,  # the child leads its own process group: one killpg reaches all
    )
    return Launched(proc, collector, stdin)
