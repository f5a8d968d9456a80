"""Memory and process limits for one sandbox, through the kernel's cgroups (v1 or v2).

rlimits bound each process; a cgroup bounds the whole sandbox: all its processes together
may use `memory_mb` of memory (tmpfs writes included) and hold `pids` processes. The
runner gives each run a cgroup of its own under its own (so the limits it already lives
under still hold), never touching a cgroup it did not create. A run's cgroup is taken back
when the run ends and handed to a later run (its limits rewritten where they differ) only
when it is as a new one would be: no process left in it, its pids.events and oom_kill
counters at zero and little memory still charged to it; any other is removed. Making and
removing a cgroup per run cost more than the rest of the sandbox's bookkeeping.

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

ROOT = Path("/sys/fs/cgroup")
_CONTROLLERS = ("memory", "pids")


_POOL = 8  # idle cgroups kept for later runs
_NAMES = itertools.count(1)  # run-<n>, one sequence per process: two runners' sandboxes share kiwi-<pid>
_REUSE_CHARGED = 8 * 1024 * 1024  # memory still charged (page cache) above which a cgroup is not reused


@dataclass(eq=False)
class RunCgroup:
    """One run's cgroup: the directories a process joins (one per v1 controller, one in v2)."""

    version: int
    dirs: tuple[Path, ...]
    memory_mb: int = 0
    pids: int = 0
    owner: Cgroups | None = None  # who takes it back when the run ends (release)

    def procs_files(self) -> list[str]:
        return [str(d / "cgroup.procs") for d in self.dirs]

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

    def release(self) -> None:
        """The run has ended: hand the cgroup back for a later run, or remove it."""
        if self.owner is not None:
            self.owner.take_back(self)
        else:
            self.remove()

    def reusable(self) -> bool:
        """Whether the cgroup is as a new one would be: empty, no limit ever hit in it, and
        little memory still charged to it."""
        pids_dir, memory_dir = (self.dirs[1], self.dirs[0]) if self.version == 1 else (self.dirs[0], self.dirs[0])
        try:
            if _read(pids_dir / "pids.current").strip() != "0" or _count(_read(pids_dir / "pids.events"), "max"):
                return False
            if self.version == 1:
                events, charged = _read(memory_dir / "memory.oom_control"), memory_dir / "memory.usage_in_bytes"
            else:
                events, charged = _read(memory_dir / "memory.events"), memory_dir / "memory.current"
            return not _count(events, "oom_kill") and int(_read(charged)) <= _REUSE_CHARGED
        except (OSError, ValueError):
            return False

    def remove(self) -> None:
        """Remove the run's cgroup; its processes are gone by now (the sandbox died with the run).
        A cgroup still holding a process (it takes the kernel a moment to release a killed
        one) is emptied by SIGKILL first."""
        for d in self.dirs:
            for _ in range(50):
                try:
                    d.rmdir()
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
        self._idle: list[RunCgroup] = []  # released cgroups as a new one would be (RunCgroup.reusable)
        if self.parents:
            atexit.register(self.close)

    @property
    def available(self) -> bool:
        return bool(self.parents)

    def create(self, memory_mb: int, pids: int) -> RunCgroup | None:
        """A new cgroup limited to `memory_mb` and `pids`, or None where cgroups are unavailable."""
        if not self.parents:
            return None
        while self._idle:
            group = self._idle.pop()
            try:
                self._limit(group, memory_mb, pids)
                return group
            except OSError:
                group.remove()
        name = f"run-{next(_NAMES)}"
        dirs = []
        try:
            for parent in self.parents:
                d = parent / name
                d.mkdir()
                dirs.append(d)
            group = RunCgroup(self.version, tuple(dirs), owner=self)
            if self.version == 2:
                with contextlib.suppress(OSError):
                    _write(dirs[0] / "memory.swap.max", "0")
            self._limit(group, memory_mb, pids)
            return group
        except OSError as exc:
            for d in dirs:
                with contextlib.suppress(OSError):
                    d.rmdir()
            logger.warning("could not make a cgroup for a sandbox (%s): rlimits only for this run", exc)
            return None

    def _limit(self, group: RunCgroup, memory_mb: int, pids: int) -> None:
        """Set the group's limits, writing only those that differ from what it has."""
        if group.memory_mb != memory_mb:
            group.memory_mb = 0  # unknown until written
            name = "memory.limit_in_bytes" if self.version == 1 else "memory.max"
            _write(group.dirs[0] / name, str(memory_mb * 1024 * 1024))
            group.memory_mb = memory_mb
        if group.pids != pids:
            group.pids = 0
            _write(group.dirs[-1] / "pids.max", str(pids))
            group.pids = pids

    def take_back(self, group: RunCgroup) -> None:
        """A run's cgroup once the run ended: kept for a later run when it is as a new one
        would be (and the pool has room), else removed."""
        if self.parents and len(self._idle) < _POOL and group.reusable():
            self._idle.append(group)
        else:
            group.remove()

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
        self.parents = ()
        self._idle = []


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


def _write(path: Path, text: str) -> None:
    with open(path, "w") as f:
        f.write(text)


def _read(path: Path) -> str:
    fd = os.open(path, os.O_RDONLY)
    try:
        return os.read(fd, 4096).decode()
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
