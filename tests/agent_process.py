"""`kiwi agent` as a real process, and `kiwi` run warm or cold beside it (shared by the agent's tests)."""

from __future__ import annotations

import re
import signal
import subprocess
import sys
import time
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path

from tests.kiwi_cli import Done

# A `kiwi` that only takes the warm path: 99 when it could not, and a note of what it imported.
WARM_ONLY = (
    "import os, sys\n"
    "from runner.cli import warm\n"
    "code = warm.try_warm(sys.argv[1:])\n"
    "heavy = sorted(m for m in ('psycopg', 'mcp', 'httpx', 'pydantic', 'runner.config') if m in sys.modules)\n"
    "open(os.environ['KIWI_TEST_NOTE'], 'w').write(' '.join(heavy))\n"
    "sys.stdout.flush(); os._exit(99 if code is None else code)\n"
)


def runtime_dir(root: Path) -> Path:
    """An $XDG_RUNTIME_DIR of this user only, as a login session has."""
    folder = root / "run"
    folder.mkdir(mode=0o700)
    return folder


@contextmanager
def agent(env: dict[str, str], cwd: Path, *args: str) -> Iterator[Path]:
    """`kiwi agent` running until the block ends; yields its socket."""
    where = subprocess.run(
        [sys.executable, "-m", "runner.cli", *args, "agent", "--where"],
        cwd=cwd,
        env=env,
        capture_output=True,
        text=True,
        check=True,
    )
    path = Path(where.stdout.strip())
    proc = subprocess.Popen(
        [sys.executable, "-m", "runner.cli", *args, "agent"], cwd=cwd, env=env, stderr=subprocess.PIPE, text=True
    )
    try:
        deadline = time.monotonic() + 60
        while not path.exists():
            assert proc.poll() is None, proc.stderr.read() if proc.stderr else ""
            assert time.monotonic() < deadline, "the agent did not start"
            time.sleep(0.05)
        yield path
    finally:
        proc.send_signal(signal.SIGTERM)
        proc.wait(timeout=30)


def cold(args: list[str], *, cwd: Path, env: dict[str, str]) -> Done:
    done = subprocess.run(
        [sys.executable, "-m", "runner.cli", *args],
        cwd=cwd,
        env={**env, "KIWI_AGENT": "off"},
        capture_output=True,
        timeout=120,
    )
    return Done(done.returncode, done.stdout.decode("utf-8", "surrogateescape"), done.stderr.decode())


def warm(args: list[str], *, cwd: Path, env: dict[str, str], note: Path) -> tuple[Done, str]:
    """The command through the agent only, and the heavy modules the client imported (none, we hope)."""
    done = subprocess.run(
        [sys.executable, "-c", WARM_ONLY, *args],
        cwd=cwd,
        env={**env, "KIWI_TEST_NOTE": str(note)},
        capture_output=True,
        timeout=120,
    )
    result = Done(done.returncode, done.stdout.decode("utf-8", "surrogateescape"), done.stderr.decode())
    return result, note.read_text() if note.exists() else "?"


def steady(text: str) -> str:
    """Output with what differs between any two runs (a duration) written as N."""
    return re.sub(r"(\b\d+(?:\.\d+)? ms\b|\"duration_ms\": [\d.e+-]+)", "N", text)
