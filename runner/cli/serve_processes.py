"""`kiwi serve --transport http --processes N`: N server processes on one port, nothing shared but Postgres.

    kiwi serve --transport http --port 8765 --processes 4

The command's own process supervises; it serves nothing itself:

* It reserves the port (bound, not listening, SO_REUSEPORT: a taken port is an error before
  anything starts, and no other user's process can join), makes a private run directory
  (mode 0700), and starts N processes, each the same command with `--process I:DIR`.
* Each binds the port with SO_REUSEPORT and listens: Linux spreads new connections over them
  evenly. Each is a whole server (its own database pool, MCP sessions, idle expiry, session cap,
  metrics, malloc trim) and also serves on `DIR/process-I.sock`, where another process forwards
  requests for the sessions it opened (runner/mcp_server/http_routing.py).
* A process that ends while the server runs is started again (at once when it had run a while;
  after a growing pause, up to MAX_BACKOFF_S, when it keeps ending at start-up). Its sessions
  ended with it; their clients open new ones.
* SIGTERM or SIGINT stops them all (SIGTERM each, SIGKILL what is left after STOP_TIMEOUT_S)
  and removes the run directory; each is also asked by the kernel to end if the supervisor
  dies without that (PR_SET_PDEATHSIG), so no process is left behind.

Linux only (SO_REUSEPORT spreads connections there; elsewhere run N instances behind a load
balancer with session affinity).
"""

from __future__ import annotations

import asyncio
import contextlib
import ctypes
import os
import shutil
import signal
import socket
import subprocess
import sys
import tempfile
import time
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from prometheus_client.multiprocess import mark_process_dead

from ..errors import UsageError
from ..telemetry.prometheus import MULTIPROCESS_DIR
from .listen import bind

__all__ = ["ProcessSlot", "listening_socket", "parse_process", "supervise", "unix_socket"]

STOP_TIMEOUT_S = 15.0
"""How long the processes have to end after SIGTERM (their graceful shutdown is 5 s) before SIGKILL."""
START_TIMEOUT_S = 120.0
MAX_BACKOFF_S = 30.0
METRICS_DIR = "metrics"  # under the run directory: every process's values, for /metrics
STEADY_S = 10.0
"""A process that ran this long before ending is restarted at once; sooner, after a pause."""


def parse_process(text: str) -> tuple[int, Path]:
    """`--process I:DIR` (given by the supervisor to each process it starts)."""
    index, colon, run_dir = text.partition(":")
    if not colon or not index.isdigit() or not run_dir:
        raise UsageError(f"--process {text!r} is not INDEX:DIR", hint="the supervisor gives it; do not set it")
    return int(index), Path(run_dir)


def reserve(host: str, port: int, processes: int) -> socket.socket:
    """The supervisor's hold on host:port: bound with SO_REUSEPORT, never listening."""
    if not sys.platform.startswith("linux") or not hasattr(socket, "SO_REUSEPORT"):
        raise UsageError(
            f"--processes {processes} needs Linux (SO_REUSEPORT spreads the connections)",
            hint="run several `kiwi serve` instances on other ports behind a load balancer with session affinity",
        )
    return _socket(host, port, listen=False)


def listening_socket(host: str, port: int) -> socket.socket:
    """A process's own listening socket on the supervisor's port (SO_REUSEPORT)."""
    return _socket(host, port, listen=True)


def unix_socket(path: Path) -> socket.socket:
    """The socket other processes forward this process's sessions' requests to."""
    with contextlib.suppress(FileNotFoundError):
        path.unlink()  # left by the process this one replaces
    sock = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)
    sock.bind(str(path))
    sock.listen(2048)
    sock.set_inheritable(False)
    return sock


def _socket(host: str, port: int, *, listen: bool) -> socket.socket:
    return bind(host, port, reuse_port=True, listen=listen)


@dataclass
class ProcessSlot:
    """One of the N processes: the one running now, and how soon it last ended."""

    index: int
    proc: subprocess.Popen[bytes] | None = None
    started: float = 0.0
    failures: int = 0
    restarts: int = 0


async def supervise(argv: list[str], *, host: str, port: int, processes: int, say: Any) -> None:
    """Run N processes of `argv` (the command as given) on host:port until SIGTERM or SIGINT."""
    hold = reserve(host, port, processes)
    run_dir = Path(tempfile.mkdtemp(prefix="kiwi-serve-"))  # mode 0700: only this user forwards
    port = hold.getsockname()[1]
    base = [*argv, "--port", str(port)]
    slots = [ProcessSlot(i) for i in range(processes)]
    stopping = asyncio.Event()
    loop = asyncio.get_running_loop()
    for signum in (signal.SIGTERM, signal.SIGINT):
        loop.add_signal_handler(signum, stopping.set)
    try:
        for slot in slots:
            _start(slot, base, run_dir)
        await _wait_ready(slots, run_dir, stopping)
        pids = ", ".join(str(s.proc.pid) for s in slots if s.proc is not None)
        say(f"serving with {processes} processes (pids {pids}); supervisor pid {os.getpid()}")
        while not stopping.is_set():
            for slot in slots:
                if slot.proc is not None and slot.proc.poll() is not None and not stopping.is_set():
                    await _restart(slot, base, run_dir, stopping, say)
            with contextlib.suppress(TimeoutError):
                await asyncio.wait_for(stopping.wait(), 0.2)
    finally:
        for signum in (signal.SIGTERM, signal.SIGINT):
            loop.remove_signal_handler(signum)
        await asyncio.to_thread(_stop_all, slots)
        hold.close()
        shutil.rmtree(run_dir, ignore_errors=True)


def _start(slot: ProcessSlot, base: list[str], run_dir: Path) -> None:
    """Start process `slot.index`, its metrics kept in the run directory with the others' (any of
    them answers /metrics for all: runner/telemetry/prometheus.py)."""
    metrics = run_dir / METRICS_DIR
    metrics.mkdir(mode=0o700, exist_ok=True)
    slot.proc = subprocess.Popen(
        [*base, "--process", f"{slot.index}:{run_dir}"],
        stdin=subprocess.DEVNULL,
        env={**os.environ, MULTIPROCESS_DIR: str(metrics)},
        preexec_fn=_die_with_parent,
    )
    slot.started = time.monotonic()


async def _restart(slot: ProcessSlot, base: list[str], run_dir: Path, stopping: asyncio.Event, say: Any) -> None:
    assert slot.proc is not None
    code = slot.proc.returncode
    ran = time.monotonic() - slot.started
    slot.failures = 0 if ran >= STEADY_S else slot.failures + 1
    pause = 0.0 if slot.failures == 0 else min(MAX_BACKOFF_S, 0.5 * 2 ** (slot.failures - 1))
    say(
        f"process {slot.index} (pid {slot.proc.pid}) ended (exit {code}) after {ran:.1f} s; starting it again"
        + (f" in {pause:g} s" if pause else "")
    )
    mark_process_dead(slot.proc.pid, str(run_dir / METRICS_DIR))  # its live gauges go; its counts stay in the sums
    slot.proc = None
    if pause:
        with contextlib.suppress(TimeoutError):
            await asyncio.wait_for(stopping.wait(), pause)
        if stopping.is_set():
            return
    slot.restarts += 1
    _start(slot, base, run_dir)
    assert slot.proc is not None
    say(f"process {slot.index} started again: pid {slot.proc.pid}")


async def _wait_ready(slots: list[ProcessSlot], run_dir: Path, stopping: asyncio.Event) -> None:
    """Until each process answers /healthz on its own socket (or one has ended: UsageError)."""
    from ..mcp_server.http_routing import worker_socket

    deadline = time.monotonic() + START_TIMEOUT_S
    waiting = list(slots)
    while waiting and not stopping.is_set():
        for slot in list(waiting):
            assert slot.proc is not None
            if slot.proc.poll() is not None:
                raise UsageError(
                    f"process {slot.index} of kiwi serve ended at start-up (exit {slot.proc.returncode})",
                    hint="its error is above",
                )
            if await asyncio.to_thread(_healthy, worker_socket(run_dir, slot.index)):
                waiting.remove(slot)
        if time.monotonic() > deadline:
            raise UsageError(f"kiwi serve's processes did not start within {START_TIMEOUT_S:g} s")
        if waiting:
            await asyncio.sleep(0.1)


def _healthy(path: Path) -> bool:
    try:
        with socket.socket(socket.AF_UNIX, socket.SOCK_STREAM) as s:
            s.settimeout(2.0)
            s.connect(str(path))
            s.sendall(b"GET /healthz HTTP/1.0\r\nHost: kiwi\r\n\r\n")
            head = b""
            while len(head) < 12 and (chunk := s.recv(64)):
                head += chunk
            return head.startswith(b"HTTP/1.1 200")
    except OSError:
        return False


def _stop_all(slots: list[ProcessSlot]) -> None:
    running = [s.proc for s in slots if s.proc is not None and s.proc.poll() is None]
    for proc in running:
        with contextlib.suppress(ProcessLookupError):
            proc.send_signal(signal.SIGTERM)
    deadline = time.monotonic() + STOP_TIMEOUT_S
    for proc in running:
        try:
            proc.wait(timeout=max(0.0, deadline - time.monotonic()))
        except subprocess.TimeoutExpired:
            proc.kill()
            proc.wait()
    for slot in slots:
        if slot.proc is not None:
            slot.proc.wait()


def _die_with_parent() -> None:
    """In the child before exec: the kernel sends it SIGTERM when the supervisor dies."""
    PR_SET_PDEATHSIG = 1
    with contextlib.suppress(OSError, AttributeError):
        ctypes.CDLL(None, use_errno=True).prctl(PR_SET_PDEATHSIG, signal.SIGTERM)
