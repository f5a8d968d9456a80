"""The egress proxies' processes are awaited by their owner, never reaped by the run reaper.

Regression: the reaper reaps exited children of other sessions at the end of every run, and
the proxies (tinyproxy, socat) are such children. One that died was reaped there: its Popen
then read exit status 0 (the real status lost), and its pid was free for the kernel to give
to another process while the proxy's `kill` still signalled that process group: a process
Kiwi did not create could be killed."""

from __future__ import annotations

import os
import shutil
import signal
import time

import pytest

from runner.primitives import childwatch, procfs, reaper
from runner.sandbox.egress import Egress, normalise_allow

pytestmark = pytest.mark.skipif(
    not (shutil.which("tinyproxy") and shutil.which("socat")), reason="needs tinyproxy and socat"
)
ALLOW = ["127.0.0.1:9"]


async def test_a_dead_proxys_exit_status_stays_its_own() -> None:
    async with Egress() as e:
        first = await e.socket_for(ALLOW)
        procs = list(e._proxies[normalise_allow(ALLOW)].procs)
        assert procs and all(childwatch.is_started(p.pid) for p in procs)
        for p in procs:
            os.killpg(p.pid, signal.SIGKILL)
        for p in procs:
            deadline = time.monotonic() + 5
            while (entry := procfs.stat(p.pid)) is not None and entry.alive:
                assert time.monotonic() < deadline, "the proxy did not die"
                time.sleep(0.01)
        reaper.reap_exited_orphans()  # what the end of every run does
        assert [p.wait(timeout=5) for p in procs] == [-signal.SIGKILL] * len(procs)
        assert await e.socket_for(ALLOW) != first, "a dead proxy is noticed and started again"
    assert not any(childwatch.is_started(p.pid) for p in procs), "forgotten once reaped"
