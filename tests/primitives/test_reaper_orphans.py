"""The end-of-run reaping of exited orphans, with real processes: it reaps a child no run
awaits and leaves one awaited on the loop alone, without reading the awaited one's /proc.

Regression: with concurrent runs, most children of a server are roots awaited on the loop;
the reaper read every child's stat at the end of every run (5% of the HTTP server's CPU with
20 sessions), and reading one still in its exec waits for the exec to end."""

from __future__ import annotations

import os
import time

import pytest

from runner.primitives import childwatch, procfs, reaper


def _exited_child() -> int:
    """A child in a session of its own that has exited and is not reaped yet (a zombie)."""
    pid = os.posix_spawnp("true", ["true"], os.environ, setsid=True)
    deadline = time.monotonic() + 10
    while (entry := procfs.stat(pid)) is not None and entry.alive:
        assert time.monotonic() < deadline, "the child did not exit"
        time.sleep(0.005)
    return pid


def test_an_awaited_child_is_neither_reaped_nor_read(monkeypatch: pytest.MonkeyPatch) -> None:
    awaited, orphan = _exited_child(), _exited_child()
    childwatch.started(awaited)
    read: list[int] = []
    real_stat = procfs.stat

    def counting_stat(pid: int) -> procfs.ProcStat | None:
        read.append(pid)
        return real_stat(pid)

    try:
        monkeypatch.setattr(procfs, "stat", counting_stat)
        reaper.reap_exited_orphans()
        monkeypatch.undo()
        assert orphan in read, "the orphan was looked at"
        assert awaited not in read, "the awaited child's /proc was read"
        assert procfs.stat(orphan) is None, "the exited orphan was reaped"
        entry = procfs.stat(awaited)
        assert entry is not None and entry.state == "Z", "the awaited child is left to its waiter"
    finally:
        assert childwatch.reap(awaited) == 0
        if procfs.stat(orphan) is not None:
            os.waitpid(orphan, 0)
