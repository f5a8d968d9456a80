"""One process confined: the bubblewrap command line around it, and what ended it.

A `Confinement` is made per process by `Sandbox.confine` (sandbox.py). The subprocess
primitive's `spawn` asks it for the command to start instead of the tool's own
(`command`), polls it while the process runs (`over_pids`), and asks it afterwards which
limit, if any, ended the run (`limit_hit`), then releases it (`release`).

Inside, the process sees: /usr (and /bin, /lib, /lib64, /sbin as links into it), a small
/etc of the runner's (etc.py: the dynamic linker's cache, time zones, TLS roots, a passwd
naming only root and nobody), its own /proc and /dev, a private /tmp of `file_mb`, the tool's files at
/kiwi/tool and its environment at /kiwi/env (read-only), the runner's own bin directory at
/kiwi/bin (read-only: bundled commands such as uv), and the host paths its profile grants
(its directories on PATH after the system's: a runtime whose interpreter is elsewhere grants it).
It runs as nobody (65534) with no capabilities and no_new_privs when the runner is root, or
as the runner's uid in a new user namespace otherwise; in new PID, mount, network, IPC and
UTS namespaces; and it dies with its run: bubblewrap's init is PID 1 of the namespace, so
when the tool exits, or the runner kills bubblewrap, every process in it is killed.
"""

from __future__ import annotations

import functools
import os
import re
import shutil
import signal
from collections.abc import Mapping
from dataclasses import dataclass, field
from pathlib import Path, PurePosixPath

from ..errors import PrimitiveError
from . import etc
from .cgroups import RunCgroup
from .profile import LIMIT_WORDS, Limits, Profile

TOOL_DIR = "/kiwi/tool"
ENV_DIR = "/kiwi/env"
BIN_DIR = "/kiwi/bin"
EGRESS_SOCKET = "/run/kiwi/egress.sock"
SANDBOX_PATH = f"/usr/local/bin:/usr/bin:/bin:{BIN_DIR}"
NOBODY = 65534

_SYSTEM = frozenset(("usr", "tmp", "proc", "dev", "bin", "lib", "lib64", "sbin", "etc"))  # made by the sandbox itself
# EMFILE as C (strerror), Python ([Errno 24]), bash, Node and Deno say it; not ENFILE ("... in
# system"), the machine's table, which is no limit of the sandbox's
_EMFILE = re.compile(r"\bEMFILE\b|too many open files(?! in system)", re.IGNORECASE)
_EMFILE_TAIL = 64 * 1024  # where a failing process says why: the end of its stderr
_PRELUDE_MIN_OPEN_FILES = 64  # bubblewrap's own start opens a few; a lower limit is set inside it
_SYSTEM_PREFIXES = ("/usr/", "/bin/", "/lib/", "/sbin/", "/lib64/")  # the host's own, bound read-only
_FOUND: set[tuple[str, str]] = set()  # (command, PATH) found under _SYSTEM_PREFIXES: resolve() looked once
_DROP = ("HTTP_PROXY", "HTTPS_PROXY", "ALL_PROXY", "NO_PROXY", "http_proxy", "https_proxy", "all_proxy", "no_proxy")


@dataclass(frozen=True)
class Mount:
    host: str
    inside: str
    writable: bool = False


@dataclass(frozen=True)
class Egress:
    """The egress proxy's host socket and what the process needs to use it (egress.py)."""

    socket: str
    prefix: tuple[str, ...]
    env: Mapping[str, str]


@dataclass
class Confinement:
    """How one process is started in its sandbox (see the module docstring)."""

    profile: Profile
    mounts: tuple[Mount, ...]
    cwd: str
    state_dir: Path  # the runner's files bound into every sandbox (its /etc: etc.py; the seccomp filter)
    host_environ: Mapping[str, str]
    as_root: bool
    cgroup: RunCgroup | None = None
    egress: Egress | None = None
    seccomp_file: str | None = None  # the runner's compiled filter (seccomp.py), loaded by bubblewrap
    hit: str | None = field(default=None, init=False)  # the limit the runner ended the run for

    # -- what to start

    def command(self, argv: list[str], env: Mapping[str, str]) -> tuple[list[str], dict[str, str]]:
        """The argv and environment to spawn instead of `argv` and `env`. The environment is
        bubblewrap's own, which it hands to the process unchanged: nothing in it shows in argv."""
        inner = [*self._drop_privileges(), *self._rlimits(), *(self.egress.prefix if self.egress else ()), *argv]
        outer = [*self._prelude(), _bwrap(), *self._bwrap_args(), "--", *inner]
        return outer, self._environment(env)

    def search_path(self) -> str:
        """The sandbox's PATH: the system's directories and the runner's bin, then every directory
        the profile grants for reading (where a runtime whose interpreter is not under /usr says
        it is: deno_runtime's KIWI_DENO_DIR). Granted ones come last, so they shadow nothing."""
        granted = [p for p in self.profile.read if os.path.isdir(p)]
        return ":".join([SANDBOX_PATH, *granted])

    def resolve(self, command: str, path: str) -> str:
        """Where the sandbox will find `command` (on its PATH), checked on the host through the
        mounts, so a missing command is a clear error before anything starts."""
        key = (command, path)
        if "/" in command:
            candidates = [command if command.startswith("/") else str(PurePosixPath(self.cwd) / command)]
        elif key in _FOUND:
            return command
        else:
            candidates = [str(PurePosixPath(d) / command) for d in path.split(":") if d.startswith("/")]
        for inside in candidates:
            host = self.to_host(inside)
            if host is not None and os.path.isfile(host) and os.access(host, os.X_OK):
                if "/" not in command and host.startswith(_SYSTEM_PREFIXES) and len(_FOUND) < 1024:
                    _FOUND.add(key)  # the host's own, read-only: looked at once per process
                return command
        seen = ", ".join(sorted({m.inside for m in self.mounts} | {"/usr"}))
        raise PrimitiveError(
            f"command not found: {command} (in the sandbox the tool runs in)",
            hint=f"the sandbox sees {seen}; a tool's command must be installed under /usr, be one of its "
            "files, or be in a directory an admin-published element grants (sandbox.fs.read: granted "
            "directories are on the sandbox's PATH)",
        )

    def to_host(self, inside: str) -> str | None:
        """The host path behind a path inside the sandbox (None: nothing is mounted there)."""
        p = PurePosixPath(inside)
        if str(p).startswith(_SYSTEM_PREFIXES):  # the host's own, read-only
            return str(p)
        best: Mount | None = None
        for m in self.mounts:
            under = p == PurePosixPath(m.inside) or PurePosixPath(m.inside) in p.parents
            if under and (best is None or len(m.inside) > len(best.inside)):
                best = m
        if best is None:
            return None
        return str(PurePosixPath(best.host) / p.relative_to(best.inside))

    # -- while and after it runs

    def over_pids(self) -> bool:
        """Whether the run hit its process limit (then the runner ends it: a fork bomb would
        otherwise spin at the limit until its timeout)."""
        if self.cgroup is not None and self.cgroup.pids_hit():
            self.hit = "pids"
            return True
        return False

    def limit_hit(self, exit_code: int | None, stderr: str = "") -> str | None:
        """Which limit ended the run: the one the runner ended it for, else what the kernel did
        (open_files, an rlimit that ends no process by itself: a failure that says EMFILE)."""
        if self.hit:
            return self.hit
        if exit_code == 0:  # it ended as it chose to (the cgroup's counters are not read for nothing)
            return None
        if self.cgroup is not None and self.cgroup.memory_hit():
            return "memory_mb"
        if exit_code in (128 + signal.SIGXCPU, -signal.SIGXCPU):
            return "cpu_s"
        if exit_code in (128 + signal.SIGXFSZ, -signal.SIGXFSZ):
            return "file_mb"
        if self.cgroup is not None and self.cgroup.pids_hit():
            return "pids"
        if _EMFILE.search(stderr[-_EMFILE_TAIL:]):
            return "open_files"
        return None

    def describe_limit(self, name: str) -> str:
        value = self.profile.limits.as_dict()[name]
        unit = {"memory_mb": " MB", "file_mb": " MB", "cpu_s": " s"}.get(name, "")
        return f"the sandbox's {LIMIT_WORDS[name]} limit ({name}: {value:g}{unit}) ended the run"

    def release(self) -> None:
        if self.cgroup is not None:
            self.cgroup.remove()

    # -- the pieces of the command

    def _prelude(self) -> list[str]:
        """A shell that moves itself into the run's cgroup, sets the rlimits bubblewrap itself
        lives within, and opens the seccomp filter as fd 9, then becomes bubblewrap: every
        process of the sandbox is born inside the cgroup and under the limits, with no window
        before they apply (and no exec of prlimit of its own for them)."""
        procs = self.cgroup.join_files() if self.cgroup is not None else []
        words = ["--"]
        if self.seccomp_file is not None:
            words.append(self.seccomp_file)
        script = _prelude_script(self.profile.limits, self.seccomp_file is not None)
        return ["/bin/sh", "-c", script, "sh", *procs, *words]

    def _drop_privileges(self) -> list[str]:
        if not self.as_root:
            return []
        return [
            "/usr/bin/setpriv",
            f"--reuid={NOBODY}",
            f"--regid={NOBODY}",
            "--clear-groups",
            "--inh-caps=-all",
            "--bounding-set=-all",
            "--no-new-privs",
            "--",
        ]

    def _rlimits(self) -> list[str]:
        """prlimit inside the sandbox, only for the limits the prelude cannot set without
        hindering bubblewrap: a small open-files limit, and, with no cgroup, the data size and
        (for a uid that is not root's, counted across its processes) the process count."""
        limits = self.profile.limits
        args = []
        if limits.open_files < _PRELUDE_MIN_OPEN_FILES:
            args.append(f"--nofile={limits.open_files}")
        if self.cgroup is None:  # no cgroup: bound what rlimits can
            args.append(f"--data={limits.memory_mb * 1024 * 1024}")
            if not self.as_root:
                args.append(f"--nproc={limits.pids}")
        return ["/usr/bin/prlimit", *args, "--"] if args else []

    def _bwrap_args(self) -> list[str]:
        args = [
            "--die-with-parent",
            "--new-session",
            "--unshare-ipc",
            "--unshare-pid",
            "--unshare-net",
            "--unshare-uts",
            "--unshare-cgroup-try",
            "--hostname",
            "kiwi-sandbox",
        ]
        if not self.as_root:
            args += ["--unshare-user", "--cap-drop", "ALL", "--disable-userns"]
        args += _system_binds()
        # bubblewrap makes missing mount points 0700 as root: the sandbox's user could not
        # traverse them, so every directory above a mount is made first, 0755 (the same
        # directories for every run with the same mount points: worked out once)
        insides = tuple(m.inside for m in self.mounts)
        parents, in_tmp = _layout(insides, self.cwd, self.egress is not None)
        args += parents
        args += ["--ro-bind", f"{self.state_dir}/etc", "/etc"]  # etc.py: the runner's small /etc
        args += _etc_binds()
        args += ["--proc", "/proc", "--dev", "/dev"]
        args += ["--size", str(self.profile.limits.file_mb * 1024 * 1024), "--perms", "1777", "--tmpfs", "/tmp"]
        args += in_tmp
        for m in self.mounts:
            args += ["--bind" if m.writable else "--ro-bind", m.host, m.inside]
        if self.egress is not None:
            args += ["--bind", self.egress.socket, EGRESS_SOCKET]
        if self.seccomp_file is not None:
            args += ["--seccomp", "9"]
        args += ["--chdir", self.cwd]
        return args

    def _environment(self, env: Mapping[str, str]) -> dict[str, str]:
        out = {k: v for k, v in env.items() if k not in _DROP}
        # what the runner's own environment handed down names host paths the sandbox cannot see
        if out.get("PATH", self.host_environ.get("PATH")) == self.host_environ.get("PATH"):
            out["PATH"] = self.search_path()
        if out.get("HOME", self.host_environ.get("HOME")) == self.host_environ.get("HOME"):
            out["HOME"] = "/tmp"
        out["TMPDIR"] = "/tmp"
        if self.egress is not None:
            out.update(self.egress.env)
        return out


def network_hint(confine: Confinement | None) -> str:
    """Added to a hint when a server does not start: a sandboxed one that fetches its package or
    calls its API hangs or fails without those hosts (nothing when it is not sandboxed)."""
    if confine is None:
        return ""
    network = ", ".join(confine.profile.network) or "none"
    return (
        f"; it runs in the sandbox, reaching only the network its profile allows ({network}): a server "
        "that fetches its package (npx, uvx) or calls an API needs each host:port in config.sandbox.network"
    )


@functools.lru_cache(maxsize=256)
def _layout(insides: tuple[str, ...], cwd: str, egress: bool) -> tuple[tuple[str, ...], tuple[str, ...]]:
    """bubblewrap's words making the directories a sandbox with these mount points (`insides`)
    and working directory needs: (those above a mount, outside the system's own; those in its
    /tmp, made once the tmpfs is there), each 0755."""
    dirs = [*_parents(insides, cwd, egress)]
    parents = tuple(w for d in dirs for w in ("--perms", "0755", "--dir", d))
    in_tmp = tuple(w for d in _in_tmp(insides, cwd) for w in ("--perms", "0755", "--dir", d))
    return parents, in_tmp


def _parents(insides: tuple[str, ...], cwd: str, egress: bool) -> list[str]:
    paths = [*insides, cwd, *((EGRESS_SOCKET,) if egress else ())]
    parents = set()
    for path in paths:
        cut = path.rfind("/")
        while cut > 0:
            path = path[:cut]
            parents.add(path)
            cut = path.rfind("/")
    mounted = set(insides)
    if not any(cwd == m or cwd.startswith(m + "/") for m in mounted):
        parents.add(cwd)  # entered, even where nothing is mounted (an MCP server's relative paths)
    keep = [d for d in parents if d.split("/", 2)[1] not in _SYSTEM and d not in mounted]
    return sorted(keep, key=lambda d: (d.count("/"), d))


def _in_tmp(insides: tuple[str, ...], cwd: str) -> list[str]:
    """Directories to make inside the sandbox's own /tmp once it is mounted: those above a
    mount under /tmp (a granted path), and the working directory when it is there and nothing
    is mounted at it."""
    mounted = set(insides)
    wanted: set[str] = set()
    for path in [m for m in insides if m.startswith("/tmp/")]:
        wanted.update(p for p in _ancestors(path) if p.startswith("/tmp/"))
    if cwd.startswith("/tmp/") and not any(cwd == m or cwd.startswith(m + "/") for m in mounted):
        wanted.update(p for p in [*_ancestors(cwd), cwd] if p.startswith("/tmp/"))
    return sorted(wanted - mounted, key=lambda d: (d.count("/"), d))


@functools.lru_cache(maxsize=64)
def _prelude_script(limits: Limits, seccomp: bool) -> str:
    """The prelude's shell program (Confinement._prelude) for these limits: the same for every
    run with the same limits, so written once."""
    script = 'for f; do [ "$f" = -- ] && break; echo 0 > "$f" || exit 125; shift; done; shift; '
    script += " && ".join(f"ulimit {flags}" for flags in _shell_limits(limits)) + " || exit 125; "
    if seccomp:
        script += 'exec 9< "$1" || exit 125; shift; '
    return script + 'exec "$@"'


def _shell_limits(limits: Limits) -> list[str]:
    """The prelude's `ulimit` arguments (POSIX shells count -f and -c in 512-byte blocks):
    the limits that cannot hinder bubblewrap's own start. The CPU limit's hard value, two
    seconds above its soft one, kills a process that ignores SIGXCPU."""
    cpu = max(1, int(limits.cpu_s + 0.999))
    flags = [f"-t {cpu + 2}", f"-S -t {cpu}", f"-f {limits.file_mb * 2048}", "-c 0"]
    if limits.open_files >= _PRELUDE_MIN_OPEN_FILES:
        flags.append(f"-n {limits.open_files}")
    return flags


def _ancestors(path: str) -> list[str]:
    """/a/b/c -> /a, /a/b (not / nor the path itself)."""
    parts = path.strip("/").split("/")
    return ["/" + "/".join(parts[:n]) for n in range(1, len(parts))]


@functools.cache
def _bwrap() -> str:
    """bubblewrap's path, looked up once per process (as the sandbox's probe looked once)."""
    found = shutil.which("bwrap", path="/usr/bin:/bin:/usr/local/bin")
    return found or "bwrap"


@functools.cache
def _system_binds() -> tuple[str, ...]:
    """/usr, and /bin, /lib, /lib64, /sbin as this machine lays them out (links into /usr, or
    directories of their own): looked at once per process, like the runner's own /etc."""
    args = ["--ro-bind", "/usr", "/usr"]
    for name in ("bin", "lib", "lib64", "sbin"):
        if os.path.islink(f"/{name}"):
            args += ["--symlink", f"usr/{name}", f"/{name}"]
        elif os.path.isdir(f"/{name}"):
            args += ["--ro-bind", f"/{name}", f"/{name}"]
    return tuple(args)


@functools.cache
def _etc_binds() -> tuple[str, ...]:
    """The host's /etc directories bound over the runner's small /etc (etc.bound), looked at once
    per process, as the small /etc itself is written once (sandbox.py)."""
    return tuple(word for path in etc.bound() for word in ("--ro-bind", path, path))
