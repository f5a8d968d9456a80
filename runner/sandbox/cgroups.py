"""Memory and process limits for one sandbox, through the kernel's cgroups (v1 or v2).

rlimits bound each process; a cgroup bounds the whole sandbox: all its processes together
may use `memory_mb` of memory (tmpfs writes included) and hold `pids` processes. The
runner makes one cgroup per run under its own (so the limits it already lives under still
hold), never touching a cgroup it did not create, and removes it when the run ends.

    v1: /sys/fs/cgroup/{memory,pids}/<own path>/kiwi-<pid>/<run>/
    v2: /sys/fs/cgroup/<own path>/kiwi-<pid>/<run>/   (only where memory and pids are
        delegated to the runner's cgroup: its cgroup.subtree_control lists them)

Where neither is writable, `Cgroups.available` is False and the sandbox falls back to
rlimits alone (which cannot bound a fork bomb run as root or a sandbox's total memory):
the reason is said once, and `kiwi show` prints which limits apply.
"""

from __future__ import annotations

import atexit
import contextlib
import itertools
import logging
import os
from dataclasses import dataclass
from pathlib import Path

logger = logging.getLogger("kiwi.sandbox")

_NAMES = itertools.count(1)  # run-<n>, one sequence per process: two runners' sandboxes share kiwi-<pid>
ROOT = Path("/sys/fs/cgroup")
_CONTROLLERS = ("memory", "pids")


@dataclass
class RunCgroup:
    """One run's cgroup: the directories a process joins (one per v1 controller, one in v2)."""

    version: int
    dirs: tuple[Path, ...]

    def join_files(self) -> list[str]:
        """The files the sandbox's first process writes "0" to, joining the run's cgroup. In v1
        that is `tasks`, which moves only the writing thread (the prelude's shell has one): the
        kernel then skips the write lock on every thread group that `cgroup.procs` takes, and
        its RCU grace period (about 15 ms here whenever no other move came just before: most
        runs, once they are not back to back). v2 has only `cgroup.procs`."""
        name = "tasks" if self.version == 1 else "cgroup.procs"
        return [str(d / name) for d in self.dirs]

    def _read(self, name: str) -> str:
        for d in self.dirs:
            path = d / name
            if path.exists():
                with contextlib.suppress(OSError):
                    return path.read_text()
        return ""

    def pids_hit(self) -> bool:
        """Whether a fork was refused because the run held `pids` processes."""
        return _count(self._read("pids.events"), "max") > 0

    def memory_hit(self) -> bool:
        """Whether the kernel killed a process of the run for going over `memory_mb`."""
        if self.version == 2:
            return _count(self._read("memory.events"), "oom_kill") > 0
        return _count(self._read("memory.oom_control"), "oom_kill") > 0

    def remove(self) -> None:
        """Remove the run's cgroup; its processes are gone by now (the sandbox died with the run).
        A cgroup still holding a process (it takes the kernel a moment to release a killed
        one) is emptied by SIGKILL first."""
        for d in self.dirs:
            for _ in range(50):
                try:
                    os.rmdir(d)
                    break
                except FileNotFoundError:
                    break
                except OSError:
                    _kill_members(d)
                    os.sched_yield()


class Cgroups:
    """Makes per-run cgroups under the runner's own, when the machine lets it."""

    def __init__(self) -> None:
        self.version, self.parents, self.reason = _probe()
        self._parents = tuple(str(p) for p in self.parents)
        self._swap = True  # memory.swap.max can be written (v2); False once it could not
        if self.parents:
            atexit.register(self.close)

    @property
    def available(self) -> bool:
        return bool(self.parents)

    def create(self, memory_mb: int, pids: int) -> RunCgroup | None:
        """A new cgroup limited to `memory_mb` and `pids`, or None where cgroups are unavailable."""
        if not self.parents:
            return None
        name = f"run-{next(_NAMES)}"
        dirs: list[str] = []  # plain strings and os calls: this runs once per run
        try:
            for parent in self._parents:
                d = f"{parent}/{name}"
                os.mkdir(d)
                dirs.append(d)
            memory = str(memory_mb * 1024 * 1024)
            if self.version == 1:
                _write(f"{dirs[0]}/memory.limit_in_bytes", memory)
                _write(f"{dirs[1]}/pids.max", str(pids))
            else:
                _write(f"{dirs[0]}/memory.max", memory)
                if self._swap:
                    try:
                        _write(f"{dirs[0]}/memory.swap.max", "0")
                    except OSError:
                        self._swap = False  # no swap accounting here: not tried again
                _write(f"{dirs[0]}/pids.max", str(pids))
            return RunCgroup(self.version, tuple(Path(d) for d in dirs))
        except OSError as exc:
            for d in dirs:
                with contextlib.suppress(OSError):
                    os.rmdir(d)
            logger.warning("could not make a cgroup for a sandbox (%s): rlimits only for this run", exc)
            return None

    def close(self) -> None:
        """Remove the runner's own cgroup directories (at exit: every run's are gone)."""
        for parent in self.parents:
            with contextlib.suppress(OSError):
                for child in parent.iterdir():
                    if child.is_dir():
                        _kill_members(child)
                        with contextlib.suppress(OSError):
                            child.rmdir()
                parent.rmdir()
        self.parents, self._parents = (), ()


def _probe() -> tuple[int, tuple[Path, ...], str]:
    """(version, the runner's own kiwi-<pid> directories, why not) for this machine."""
    try:
        lines = Path("/proc/self/cgroup").read_text().splitlines()
    except OSError:
        return 0, (), "no /proc/self/cgroup"
    own: dict[str, str] = {}
    for line in lines:
        _, controllers, path = line.split(":", 2)
        for c in controllers.split(","):
            own[c] = path
    mine = f"kiwi-{os.getpid()}"
    if all((ROOT / c / "cgroup.procs").exists() for c in _CONTROLLERS):  # v1
        dirs = []
        try:
            for c in _CONTROLLERS:
                _sweep(ROOT / c / own.get(c, "/").lstrip("/"))
                d = ROOT / c / own.get(c, "/").lstrip("/") / mine
                d.mkdir(exist_ok=True)
                dirs.append(d)
        except OSError as exc:
            for d in dirs:
                with contextlib.suppress(OSError):
                    d.rmdir()
            return 0, (), f"the cgroup v1 hierarchy is not writable ({exc.strerror})"
        return 1, tuple(dirs), ""
    if (ROOT / "cgroup.controllers").exists():  # v2
        base = ROOT / own.get("", "/").lstrip("/")
        try:
            delegated = (base / "cgroup.subtree_control").read_text().split()
        except OSError:
            delegated = []
        if not all(c in delegated for c in _CONTROLLERS):
            return 0, (), "cgroup v2 does not delegate memory and pids to the runner's cgroup"
        _sweep(base)
        d = base / mine
        try:
            d.mkdir(exist_ok=True)
            _write(d / "cgroup.subtree_control", "+memory +pids")
        except OSError as exc:
            with contextlib.suppress(OSError):
                d.rmdir()
            return 0, (), f"the runner's cgroup v2 is not writable ({exc.strerror})"
        return 2, (d,), ""
    return 0, (), "no cgroup memory and pids controllers are mounted"


def _sweep(parent: Path) -> None:
    """Remove what runners that were killed left under `parent`: their kiwi-<pid> directories,
    once that process is gone and nothing runs in them (Kiwi made them; nothing else does)."""
    with contextlib.suppress(OSError):
        for d in parent.glob("kiwi-*"):
            pid = d.name.removeprefix("kiwi-")
            if not pid.isdigit() or Path(f"/proc/{pid}").exists():
                continue
            for child in [*d.glob("run-*"), d]:
                with contextlib.suppress(OSError):
                    child.rmdir()


def _write(path: str | Path, text: str) -> None:
    fd = os.open(path, os.O_WRONLY | os.O_CLOEXEC)
    try:
        os.write(fd, text.encode())
    finally:
        os.close(fd)


def _count(text: str, key: str) -> int:
    for line in text.splitlines():
        parts = line.split()
        if len(parts) == 2 and parts[0] == key:
            with contextlib.suppress(ValueError):
                return int(parts[1])
    return 0


def _kill_members(d: Path) -> None:
    with contextlib.suppress(OSError):
        for pid in (d / "cgroup.procs").read_text().split():
            with contextlib.suppress(OSError):
                os.kill(int(pid), 9)
