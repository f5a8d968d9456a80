"""Regression: a runner's sandbox files (its /etc, the seccomp filter) were left in the system's
temporary directory by every runner that exited without closing its sandbox (hundreds a day
from a test suite, a killed server). Now they go with the runner, even a killed one."""

from __future__ import annotations

import os
import signal
import subprocess
import sys
import tempfile
import textwrap
from pathlib import Path

from runner.sandbox.state import StateDir, prefix, sweep

_MAKE_ONE = textwrap.dedent(
    """
    import sys, time
    from runner.sandbox import Sandbox
    box = Sandbox()
    print(box._state_dir(), flush=True)
    if sys.argv[1] == "hang":
        time.sleep(600)
    """
)


def _child(mode: str) -> tuple[subprocess.Popen[str], Path]:
    proc = subprocess.Popen([sys.executable, "-c", _MAKE_ONE, mode], stdout=subprocess.PIPE, text=True)
    assert proc.stdout is not None
    return proc, Path(proc.stdout.readline().strip())


def test_a_runner_that_exits_without_closing_leaves_no_directory() -> None:
    proc, state = _child("exit")
    assert proc.wait(timeout=60) == 0
    assert state.name.startswith(prefix()) and not state.exists()


def test_a_killed_runners_directory_is_swept_by_the_next_and_a_live_ones_is_not() -> None:
    live, live_state = _child("hang")
    killed, killed_state = _child("hang")
    try:
        os.kill(killed.pid, signal.SIGKILL)
        killed.wait(timeout=60)
        assert killed_state.is_dir(), "SIGKILL gives a process no chance to clean up"
        removed = sweep()
        assert killed_state in removed and not killed_state.exists()
        assert live_state.is_dir() and live_state not in removed, "a live runner's files are kept"
    finally:
        live.kill()
        live.wait(timeout=60)
    sweep()


def test_a_directory_without_the_owners_mark_is_never_touched() -> None:
    foreign = Path(tempfile.mkdtemp(prefix=prefix()))  # named like ours, never locked and marked
    try:
        assert foreign not in sweep() and foreign.is_dir()
    finally:
        foreign.rmdir()


def test_removing_twice_is_harmless() -> None:
    state = StateDir()
    state.remove()
    state.remove()
    assert not state.path.exists()
