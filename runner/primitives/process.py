"""Spawning one process, safely and loudly: the subprocess primitive's lower half.

`spawn(ProcessSpec) -> ProcessResult` runs one argv (never a shell) in its own process group,
in its sandbox when the spec carries one (runner/sandbox/), feeds stdin, captures stdout and
stderr up to a cap (flagging what it cut), and on a timeout, on cancellation, and after a
normal exit ends the whole group, then every other descendant (reaper.py: those that left
the group too), so no grandchild outlives the run, and says what it killed and which
sandbox limit, if any, ended it. Other parts of the runner (environment preparation,
validation, the MCP pool's servers' confinement) build on it too.
"""

from __future__ import annotations

import asyncio
import errno
import os
import shutil
import signal
import time
from collections.abc import Callable, Mapping
from dataclasses import dataclass
from pathlib import Path

from ..errors import PrimitiveError
from ..sandbox.confine import SANDBOX_PATH, Confinement
from . import childwatch, procfs, reaper
from .launch import launch
from .pipes import Collector

DEFAULT_PATH = "/usr/local/bin:/usr/bin:/bin"
DEFAULT_TIMEOUT_S = 300.0
# The longest timeout a config may set (24 h); the registry refuses more at publish with the same
# number (kiwi_internal.max_timeout_s, supabase/schemas/470_max_timeout.sql).
MAX_TIMEOUT_S = 86400.0
DEFAULT_MAX_OUTPUT_BYTES = 1024 * 1024
KILL_GRACE_S = 1.0  # between SIGTERM and SIGKILL: time to flush and clean up, not to linger
DRAIN_S = 0.5  # once the group is gone, how long pipes held by an escaped process may stay open
_PIDS_POLL_S = 0.1  # how often a sandbox's process count is looked at while it runs


@dataclass(frozen=True)
class ProcessSpec:
    """One process to run. `env` is the child's whole environment: nothing is inherited."""

    argv: list[str]
    env: Mapping[str, str]
    cwd: Path | None = None
    stdin: bytes | None = None  # written, then closed; None gives /dev/null
    timeout_s: float = DEFAULT_TIMEOUT_S
    max_output_bytes: int = DEFAULT_MAX_OUTPUT_BYTES  # per stream
    notes: tuple[str, ...] = ()  # said in the outcome's warnings (a parameter left out of argv)
    on_stderr_line: Callable[[str], None] | None = None  # each stderr line as it comes (lines.py)
    confine: Confinement | None = None  # the sandbox it runs in (runner/sandbox); None: the sandbox is off


@dataclass(frozen=True)
class ProcessResult:
    """What a process did. `exit_code` is negative when a signal ended it (-9 for SIGKILL)."""

    exit_code: int | None
    stdout: str
    stderr: str
    stdout_truncated: bool
    stderr_truncated: bool
    timed_out: bool
    duration_ms: float
    killed: tuple[tuple[int, str], ...] = ()  # (pid, command name) of what the runner had to kill
    limit: str | None = None  # the sandbox limit that ended the run (memory_mb, pids, cpu_s, file_mb)
    limit_message: str | None = None  # that, in words naming the limit and its value


async def spawn(spec: ProcessSpec) -> ProcessResult:
    """Run `spec.argv` in a new session and wait for it (bounded by `spec.timeout_s`).

    Raises PrimitiveError when the process cannot start at all (command not found,
    permission denied, missing working directory); everything after that is a result.
    """
    if not spec.argv:
        raise PrimitiveError("no command to run", hint="give the command as the first argv item")
    confine = spec.confine
    argv, env, cwd = list(spec.argv), dict(spec.env), spec.cwd
    if confine is not None:
        argv, env = confine.command(argv, env)
        confine.resolve(spec.argv[0], env.get("PATH") or SANDBOX_PATH)
        program, cwd = argv[0], None  # bubblewrap enters the working directory inside
    else:
        if spec.cwd is not None and not Path(spec.cwd).is_dir():
            raise PrimitiveError(
                f"working directory does not exist: {spec.cwd}", hint="create it, or point cwd at an existing directory"
            )
        program = _resolve(spec.argv[0], spec.env.get("PATH") or DEFAULT_PATH, spec.cwd)
    try:
        return await _spawn(spec, program, argv, env, cwd)
    finally:
        if confine is not None:
            confine.release()


async def _spawn(
    spec: ProcessSpec, program: str, argv: list[str], env: dict[str, str], cwd: Path | None
) -> ProcessResult:
    childwatch.install()  # asyncio's children in this process (an embedder's, a bench's) exit through pidfds too
    loop = asyncio.get_running_loop()
    started = time.perf_counter()
    born = reaper.ticks_now()  # no process of this run can have started before this
    proto = Collector(spec.max_output_bytes, loop, spec.on_stderr_line)
    try:
        # started at once (no await): a cancellation cannot come between its start and its watch
        child = launch([program, *argv[1:]], env=env, cwd=cwd, stdin=spec.stdin, collector=proto)
    except OSError as exc:
        raise _start_error(spec.argv[0], exc) from exc
    except ValueError as exc:  # an embedded NUL byte in argv or env
        raise PrimitiveError(
            f"cannot start {spec.argv[0]}: {exc}", hint="arguments and environment values cannot contain NUL"
        ) from exc

    pgid = child.pid
    group_ended = False
    confine = spec.confine
    watch: reaper.Watch | _Unwatched = _Unwatched()
    try:
        # a sandbox's PID namespace ends with it, and bubblewrap dies with its parent: nothing of a
        # confined run can escape the group, so only an unconfined one needs its tree watched
        if confine is None:
            watch = reaper.Watch(pgid, child.pipe_inodes(), started=born)
        timed_out = not await _wait_exit(proto, spec.timeout_s, confine)
        # After a timeout this stops the running tree; after a normal exit it stops what
        # the tool left behind (background jobs, daemons, even those that left the group
        # with setsid) and lets pipes they hold close.
        left = {pid: entry.name for pid, entry in watch.members().items() if entry.alive}
        await _end_group(pgid)
        left.update(await watch.kill())
        group_ended = True
        if timed_out:
            await asyncio.wait({proto.exited}, timeout=KILL_GRACE_S)
        if not proto.pipes_done.done():  # usually closed with the exit: no turn of the loop for nothing
            await asyncio.wait({proto.pipes_done}, timeout=DRAIN_S)
    finally:
        if not group_ended:  # cancelled (or failed) mid-run: no time for grace
            _signal_group(pgid, signal.SIGKILL)
            watch.kill_now()
        watch.close()
        child.close()
        reaper.reap_exited_orphans()

    code = child.returncode
    stderr = proto.data[2].decode("utf-8", errors="replace")
    limit = confine.limit_hit(code, stderr) if confine is not None else None
    if limit is not None:
        timed_out = False  # ended by its limit, not by its timeout
    return ProcessResult(
        exit_code=code,
        limit=limit,
        limit_message=confine.describe_limit(limit) if confine is not None and limit is not None else None,
        stdout=proto.data[1].decode("utf-8", errors="replace"),
        stderr=stderr,
        stdout_truncated=proto.truncated[1],
        stderr_truncated=proto.truncated[2],
        timed_out=timed_out,
        duration_ms=round((time.perf_counter() - started) * 1000, 3),
        killed=tuple(sorted(left.items())),
    )


class _Unwatched:
    """The watch of a confined process: its sandbox, not the runner, ends what it started."""

    def members(self) -> dict[int, procfs.ProcStat]:
        return {}

    async def kill(self) -> dict[int, str]:
        return {}

    def kill_now(self) -> None:
        pass

    def close(self) -> None:
        pass


async def _wait_exit(proto: Collector, timeout_s: float, confine: Confinement | None) -> bool:
    """Wait for the process to exit (True) or its timeout (False); a sandbox that hits its
    process limit is ended at once (a fork bomb would otherwise spin at the limit)."""
    if confine is None or confine.cgroup is None:
        done, _ = await asyncio.wait({proto.exited}, timeout=timeout_s)
        return bool(done)
    deadline = time.monotonic() + timeout_s
    while True:
        left = deadline - time.monotonic()
        if left <= 0:
            return False
        done, _ = await asyncio.wait({proto.exited}, timeout=min(left, _PIDS_POLL_S))
        if done:
            return True
        if confine.over_pids():
            return True


async def _end_group(pgid: int) -> None:
    """SIGTERM the group, give it KILL_GRACE_S to go, then SIGKILL whatever remains.

    Returns at once when the group is already empty (the common case after a normal exit).
    """
    if not _signal_group(pgid, signal.SIGTERM):
        return
    _signal_group(pgid, signal.SIGCONT)  # a stopped process only acts on SIGTERM once it runs
    deadline = time.monotonic() + KILL_GRACE_S
    while _group_alive(pgid):
        if time.monotonic() >= deadline:
            _signal_group(pgid, signal.SIGKILL)
            return
        await asyncio.sleep(0.01)


def _signal_group(pgid: int, sig: int) -> bool:
    """Signal every member of the group; False when the group no longer exists."""
    try:
        os.killpg(pgid, sig)
    except ProcessLookupError:
        return False
    except PermissionError:  # a member we may not signal (setuid); nothing more we can do
        return False
    return True


def _group_alive(pgid: int) -> bool:
    """Whether a member of the group still runs.

    killpg(pgid, 0) also counts zombies, which are dead but wait for a parent to reap them
    (forever, under an init that does not reap), so on Linux look at each member's state.
    """
    if not _signal_group(pgid, 0):
        return False
    try:
        return any(p.pgrp == pgid and p.alive for p in procfs.processes())
    except OSError:  # no /proc: trust the signal
        return True


def _resolve(command: str, path: str, cwd: Path | None) -> str:
    """Find the executable as the child would (the tool's PATH, not the runner's), so a
    missing or non-executable command gets a clear error instead of a bare OSError."""
    if os.sep in command:
        candidate = Path(command) if os.path.isabs(command) else Path(cwd or Path.cwd()).absolute() / command
        if not candidate.exists():
            raise PrimitiveError(f"command not found: {command}", hint=f"no file at {candidate}")
        if candidate.is_dir() or not os.access(candidate, os.X_OK):
            raise _permission_denied(command)
        return str(candidate)
    found = shutil.which(command, path=path)
    if found is not None:
        return found
    if shutil.which(command, mode=os.F_OK, path=path):
        raise _permission_denied(command)
    raise PrimitiveError(
        f"command not found: {command}",
        hint="install it, or make sure its directory is on the PATH the tool declares (env_passthrough or env)",
    )


def _permission_denied(command: str) -> PrimitiveError:
    return PrimitiveError(
        f"permission denied: {command}",
        hint="make it executable (chmod +x) or run it through its interpreter",
    )


def _start_error(command: str, exc: OSError) -> PrimitiveError:
    if isinstance(exc, FileNotFoundError):  # the file exists, so its #! interpreter does not
        return PrimitiveError(
            f"command not found: {command}", hint="if it is a script, check the interpreter on its #! line"
        )
    if isinstance(exc, PermissionError):
        return _permission_denied(command)
    if exc.errno == errno.E2BIG:
        return PrimitiveError(
            f"cannot run {command}: its arguments and environment are too large",
            hint="pass large values on stdin (parameters always are) rather than in args or env",
        )
    return PrimitiveError(
        f"cannot run {command}: {exc.strerror or exc}",
        hint="a script needs a #! line, or run it through its interpreter",
    )
