"""Where one run's processes live: its sandbox, its profile, its files, as the harness sees them.

A run starts up to three kinds of process: its environment's steps (which write the
environment), its validation commands and the tool itself (which only read it). Each asks
the run's `ToolSite` for its confinement; the site knows the host directories and what they
are called inside (`placeholders`), so the rest of the harness fills `{entrypoint}`,
`{workdir}` and `{env_dir}` with paths that exist where the process runs.
"""

from __future__ import annotations

import os
from collections.abc import Callable, Mapping
from dataclasses import dataclass, field, replace
from pathlib import Path
from typing import Any

from .confine import ENV_DIR, TOOL_DIR, Confinement, Mount
from .profile import Profile, profile_from
from .sandbox import Sandbox

KERNEL_SOCKET = "/run/kiwi/kernel.sock"  # where a run's kernel socket is, inside (runner/harness/kernel.py)


@dataclass
class ToolSite:
    sandbox: Sandbox | None  # None or disabled: processes run on the host (the explicit opt-out)
    # the profile, or what makes it when a process is first confined or it is shown: a run that
    # starts no process of its own (a call on a pooled MCP session) never checks its paths
    _profile: Profile | Callable[[], Profile]
    tool_dir: Path | None = None
    env_dir: Path | None = None
    environ: Mapping[str, str] = field(default_factory=dict)
    kernel: str | None = None  # the host path of the run's kernel socket, while it listens

    @property
    def profile(self) -> Profile:
        if not isinstance(self._profile, Profile):
            self._profile = self._profile()
        return self._profile

    @property
    def confined(self) -> bool:
        return self.sandbox is not None and self.sandbox.enabled

    def tool_path(self) -> str | None:
        """`{workdir}` as the process sees it."""
        if self.tool_dir is None:
            return None
        return TOOL_DIR if self.confined else str(self.tool_dir)

    def env_path(self, env_dir: Path) -> str:
        """`{env_dir}` as the process sees it."""
        return ENV_DIR if self.confined else str(env_dir)

    def inside(self, host: Path | None) -> str | None:
        """A host path under the tool's directory, as the process sees it."""
        if host is None:
            return None
        if not self.confined or self.tool_dir is None:
            return str(host)
        return TOOL_DIR + "/" + Path(host).relative_to(self.tool_dir).as_posix() if host != self.tool_dir else TOOL_DIR

    async def confine(self, cwd: Path | None = None) -> Confinement | None:
        """The tool's (or a validation command's) confinement: its files and environment read-only."""
        if not self.confined:
            return None
        assert self.sandbox is not None
        return await self.sandbox.confine(self.profile, self._mounts(), self._cwd(cwd), self.environ)

    async def confine_steps(self, env_dir: Path, spec: Mapping[str, Any], tool: str) -> Confinement | None:
        """An environment step's confinement: the environment writable, the profile the runtime
        gives its steps (environment.sandbox: its package index, say) over the tool's. Neither the
        tool's files nor the host paths its profile grants are there: an environment is shared by
        every tool whose key is the same, so its steps see nothing the key does not name (one
        tool's requirements file would otherwise build the environment every later tool with the
        same `requires` runs in)."""
        if not self.confined:
            return None
        assert self.sandbox is not None
        profile = replace(self.profile, read=(), write=())
        if spec.get("sandbox"):
            profile = profile_from(spec["sandbox"], tool, self.environ, base=profile)
        mounts = [Mount(str(env_dir), ENV_DIR, writable=True)]
        return await self.sandbox.confine(profile, mounts, ENV_DIR, self.environ)

    async def confine_server(self, cwd: str) -> Confinement | None:
        """A stdio MCP server's confinement: its profile's paths only, entered in `cwd` (where its
        relative paths point; the directory itself is empty unless the profile grants it)."""
        if not self.confined:
            return None
        assert self.sandbox is not None
        return await self.sandbox.confine(self.profile, self._mounts(), cwd, self.environ)

    def _mounts(self) -> list[Mount]:
        """The tool's files and its environment, read-only (the steps that write the environment
        mount it themselves: confine_steps)."""
        mounts = []
        if self.tool_dir is not None:
            mounts.append(Mount(str(self.tool_dir), TOOL_DIR))
        if self.env_dir is not None:
            mounts.append(Mount(str(self.env_dir), ENV_DIR))
        if self.kernel is not None:
            mounts.append(Mount(self.kernel, KERNEL_SOCKET, writable=True))
        return mounts

    def _cwd(self, cwd: Path | None) -> str:
        if cwd is not None and self.tool_dir is not None:
            inside = self.inside(cwd)
            if inside is not None:
                return inside
        return TOOL_DIR if self.tool_dir is not None else "/tmp"


def hand_over(path: Path, uid: int) -> None:
    """Give a directory tree to `uid` (an environment's steps write it as the sandbox's user),
    or back to the runner once they are done, so no sandbox can change it afterwards."""
    if os.geteuid() != 0:
        return
    for root, dirs, files in os.walk(path):
        os.lchown(root, uid, uid)
        for name in (*dirs, *files):
            os.lchown(os.path.join(root, name), uid, uid)
