"""The runner's sandbox: one per runner process, making a Confinement for each process it starts.

Every process the subprocess primitive starts (tool scripts, environment steps, validation
commands, stdio MCP servers) goes through `Sandbox.confine`. The sandbox is on unless the
runner's settings turn it off (`KIWI_SANDBOX=off`, for one trusted single-user machine);
where it is on but cannot start (no bubblewrap, no user namespaces for a non-root runner),
every run is refused with `SandboxUnavailable`, which names the missing piece and the fix:
nothing runs unsandboxed by accident.
"""

from __future__ import annotations

import contextlib
import functools
import logging
import os
import shutil
import subprocess
import sys
from collections.abc import Mapping, Sequence
from pathlib import Path
from typing import Any

from ..errors import Refused
from .cgroups import Cgroups
from .confine import BIN_DIR, EGRESS_SOCKET, Confinement, Egress, Mount
from .etc import write_etc
from .profile import Profile
from .seccomp import write_filter
from .state import StateDir

logger = logging.getLogger("kiwi.sandbox")

MODES = ("on", "off")


class SandboxUnavailable(Refused):
    """The sandbox is required and cannot start here: every run is refused (exit 4)."""

    kind = "sandbox_unavailable"


class Sandbox:
    """Makes confinements. `enabled` False is the explicit opt-out: `confine` returns None."""

    def __init__(self, enabled: bool = True, bin_dir: Path | None = None) -> None:
        self.enabled = enabled
        self.bin_dir = bin_dir if bin_dir is not None else Path(sys.executable).parent
        self._problem: str | bool | None = False  # False: not looked yet
        self._state: Path | None = None
        self._owned: StateDir | None = None  # the state directory this sandbox made (state.py)
        self._cgroups: Cgroups | None = None
        self._egress: Any = None
        self._filter: str | bool | None = False  # False: not made yet
        self.seccomp_problem: str | None = None
        self._bin_mount: tuple[Mount, ...] | None = None  # None: not looked yet
        if _shared is not None:  # made by the process this one was forked from (kiwi agent)
            self._state, self._filter = _shared

    # -- can it start here?

    def problem(self) -> str | None:
        """Why the sandbox cannot start on this machine (None: it can). Looked at once; once it
        started, this process (and a child `kiwi agent` forks for a call) does not look again."""
        global _started_here
        if self._problem is False:
            self._problem = None if _started_here else _probe()
            _started_here = self._problem is None
        return self._problem  # type: ignore[return-value]

    def check(self) -> None:
        """Raise SandboxUnavailable when the sandbox is on and cannot start."""
        if self.enabled and (why := self.problem()) is not None:
            raise SandboxUnavailable(
                f"the sandbox cannot start: {why}; no tool runs without it",
                hint="install bubblewrap (apt-get install bubblewrap; `make db` does it), or, on a trusted "
                "single-user machine only, turn the sandbox off with KIWI_SANDBOX=off",
            )

    @property
    def cgroups(self) -> Cgroups:
        if self._cgroups is None:
            self._cgroups = Cgroups()
        return self._cgroups

    def limits_enforced(self) -> dict[str, str]:
        """Which limits hold here, and how (what `kiwi show` says beside the profile)."""
        whole = "the whole sandbox (cgroup)" if self.cgroups.available else None
        return {
            "memory_mb": whole or f"each process's data size (rlimit; no cgroup: {self.cgroups.reason})",
            "pids": whole or "processes of the sandbox's uid (rlimit)",
            "cpu_s": "each process (rlimit)",
            "file_mb": "each file (rlimit) and the sandbox's /tmp",
            "open_files": "each process (rlimit)",
        }

    # -- one process

    async def confine(
        self,
        profile: Profile,
        mounts: Sequence[Mount],
        cwd: str,
        host_environ: Mapping[str, str],
        *,
        cgroup: bool = True,
    ) -> Confinement | None:
        """The confinement of one process, or None when the sandbox is off. `cgroup` False
        for long-lived processes (MCP servers) whose cgroup the caller does not manage."""
        if not self.enabled:
            return None
        self.check()
        group = self.cgroups.create(profile.limits.memory_mb, profile.limits.pids) if cgroup else None
        egress = await self._egress_for(profile.network) if profile.network else None
        binds = list(mounts)
        if self._bin_mount is None:  # looked at once: the runner's own bin directory
            self._bin_mount = (Mount(str(self.bin_dir), BIN_DIR),) if self.bin_dir.is_dir() else ()
        if self._bin_mount and not any(m.inside == BIN_DIR for m in binds):
            binds += self._bin_mount
        binds += _granted(profile.read, profile.write)
        return Confinement(
            profile=profile,
            mounts=tuple(binds),
            cwd=cwd,
            state_dir=self._state or self._state_dir(),
            host_environ=host_environ,
            as_root=_AS_ROOT,
            cgroup=group,
            egress=egress,
            seccomp_file=self._seccomp(),
        )

    async def _egress_for(self, allow: Sequence[str]) -> Egress:
        from . import egress as egress_module  # tinyproxy and socat start only for a tool with network

        if self._egress is None:
            self._egress = egress_module.Egress()
        socket = await self._egress.socket_for(list(allow))
        prefix, env = egress_module.inside(EGRESS_SOCKET)
        return Egress(socket=str(socket), prefix=tuple(prefix), env=env)

    def _seccomp(self) -> str | None:
        """The compiled seccomp filter's path, made once (None: libseccomp is missing, said once)."""
        if self._filter is False:
            path = self._state_dir() / "seccomp.bpf"
            self.seccomp_problem = write_filter(path)
            if self.seccomp_problem is not None:
                logger.warning("%s", self.seccomp_problem)
            self._filter = None if self.seccomp_problem else str(path)
        return self._filter  # type: ignore[return-value]

    def _state_dir(self) -> Path:
        """The runner's files every sandbox sees: its /etc (etc.py) and the seccomp filter."""
        if self._state is None:
            self._owned = StateDir()
            d = self._owned.path
            write_etc(d)
            d.chmod(0o755)
            self._state = d
        return self._state

    async def aclose(self) -> None:
        if self._egress is not None:
            with contextlib.suppress(Exception):
                await self._egress.aclose()
            self._egress = None
        if self._cgroups is not None:
            self._cgroups.close()
        if self._owned is not None:  # a shared directory is its sharer's (share_state keeps it)
            self._owned.remove()
        self._state = self._owned = None


@functools.lru_cache(maxsize=256)
def _granted(read: tuple[str, ...], write: tuple[str, ...]) -> tuple[Mount, ...]:
    """The mounts of the host paths a profile grants (the same for every run of its tool)."""
    return (*(Mount(p, p) for p in read), *(Mount(p, p, writable=True) for p in write))


_AS_ROOT = os.geteuid() == 0  # the runner's uid does not change while it runs


def share_state() -> Path | None:
    """Make the files every sandbox binds (its /etc, the seccomp filter) once, for this process and
    the calls `kiwi agent` forks from it, which use them read-only and never remove them; the
    caller removes the directory it returns when it stops. None (nothing shared) when the filter
    cannot be made: each call then says so itself, as a cold `kiwi` does."""
    global _shared
    box = Sandbox()
    state, seccomp = box._state_dir(), box._seccomp()
    owned = box._owned
    assert owned is not None  # made just now, by this box
    if seccomp is None:
        owned.remove()
        return None
    owned.keep()  # the lock stays held while this process lives; the caller removes the directory
    _shared = (state, seccomp)
    return state


_shared: tuple[Path, str] | None = None  # share_state()'s directory and filter


_started_here = False  # a probe started the sandbox in this process: the machine can run it
_PROBE_TRIES = 5  # a probe killed by a signal is tried again; any other failure is the answer


def _probe() -> str | None:
    """Start `true` in a minimal sandbox; say what is missing when it does not start."""
    bwrap = shutil.which("bwrap", path="/usr/bin:/bin:/usr/local/bin")
    if bwrap is None:
        return "bubblewrap (bwrap) is not installed"
    for tool in ("/usr/bin/setpriv", "/usr/bin/prlimit"):
        if os.geteuid() == 0 and not os.access(tool, os.X_OK):
            return f"{tool} (util-linux) is missing"
    argv = [bwrap, "--unshare-pid", "--unshare-net", "--die-with-parent", "--ro-bind", "/usr", "/usr"]
    if os.geteuid() != 0:
        argv += ["--unshare-user"]
    for name in ("bin", "lib", "lib64"):
        if os.path.islink(f"/{name}"):
            argv += ["--symlink", f"usr/{name}", f"/{name}"]
    argv += ["--", "/usr/bin/true"]
    for _ in range(_PROBE_TRIES):
        try:
            # Its own session: a Ctrl-C or an operator's SIGTERM to the caller's process group must
            # not kill the probe (a signal can still land before the child leaves the group: try again).
            done = subprocess.run(argv, capture_output=True, text=True, timeout=10, check=False, start_new_session=True)
        except (OSError, subprocess.TimeoutExpired) as exc:
            return f"bubblewrap did not run ({exc})"
        if done.returncode >= 0:
            break
    if done.returncode != 0:
        why = done.stderr.strip().splitlines()[-1] if done.stderr.strip() else f"exit {done.returncode}"
        if "namespace" in why.lower() or "permission" in why.lower():
            why += " (unprivileged user namespaces may be disabled: sysctl kernel.unprivileged_userns_clone=1)"
        return f"bubblewrap failed: {why}"
    return None
