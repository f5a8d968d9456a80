"""A sandbox profile: what one process may reach, read as data from the merged config.

The registry computes the effective profile of a plan (config.sandbox: narrowed up the chain,
widened only by admin-published elements); this module only reads it, fills the defaults a
config does not state, and says it back (`describe`, what `kiwi show`, MCP `load` and the run
record show). Shape:

    sandbox:
      network: ["host:port", ...]       # [] (the default): no network at all
      fs: {read: [path, ...], write: [path, ...]}   # host paths, mounted at the same path
                                        # (a ${VAR:-} that expands to nothing grants nothing)
      limits: {memory_mb, pids, cpu_s, file_mb, open_files}
"""

from __future__ import annotations

import os
import re
import stat
from collections.abc import Mapping
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from ..core.expand import expand_vars, variables_in
from ..errors import ConfigError

# Defaults when neither the config nor its chain says: enough for an interpreter and its
# packages, small enough that a fork bomb, a memory hog or a disk fill ends at the limit.
DEFAULT_LIMITS: dict[str, float] = {
    "memory_mb": 1024,
    "pids": 256,
    "cpu_s": 300,
    "file_mb": 512,
    "open_files": 1024,
}
LIMIT_WORDS = {
    "memory_mb": "memory",
    "pids": "processes",
    "cpu_s": "CPU time",
    "file_mb": "file size",
    "open_files": "open files",
}
_HOST_PORT = re.compile(r"^(?:\[[0-9A-Fa-f:.]+\]|[A-Za-z0-9](?:[A-Za-z0-9.-]{0,251}[A-Za-z0-9])?):(\d{1,5})$")


@dataclass(frozen=True)
class Limits:
    memory_mb: int = int(DEFAULT_LIMITS["memory_mb"])
    pids: int = int(DEFAULT_LIMITS["pids"])
    cpu_s: float = DEFAULT_LIMITS["cpu_s"]
    file_mb: int = int(DEFAULT_LIMITS["file_mb"])
    open_files: int = int(DEFAULT_LIMITS["open_files"])

    def as_dict(self) -> dict[str, float]:
        return {k: getattr(self, k) for k in DEFAULT_LIMITS}


@dataclass(frozen=True)
class Profile:
    """What a sandboxed process may reach. Paths are absolute and resolved."""

    network: tuple[str, ...] = ()
    read: tuple[str, ...] = ()
    write: tuple[str, ...] = ()
    limits: Limits = field(default_factory=Limits)

    def describe(self) -> dict[str, Any]:
        """The profile as shown to people and kept in the run record."""
        return {
            "network": list(self.network) or "none",
            "fs": {"read": list(self.read), "write": list(self.write)},
            "limits": self.limits.as_dict(),
        }


def profile_from(
    raw: Any, tool: str, environ: Mapping[str, str], *, base: Profile | None = None, cwd: Path | None = None
) -> Profile:
    """The profile a config's `sandbox` value describes (absent keys from `base`, else the
    defaults). ${VAR}s in paths expand from `environ` (the plan's allowed variables only);
    a relative path is relative to the runner's working directory."""
    base = base or Profile()
    if raw is None:
        return base
    if not isinstance(raw, Mapping):
        raise ConfigError(f"{tool}: config.sandbox must be a mapping (network, fs, limits)")
    network = base.network if "network" in raw else None
    if "network" in raw:
        network = tuple(_network(raw.get("network"), tool))
    fs = raw.get("fs")
    read, write = base.read, base.write
    if fs is not None:
        if not isinstance(fs, Mapping):
            raise ConfigError(f"{tool}: config.sandbox.fs must be a mapping (read, write)")
        if "read" in fs:
            read = tuple(_paths(fs.get("read"), f"{tool}: config.sandbox.fs.read", environ, cwd))
        if "write" in fs:
            write = tuple(_paths(fs.get("write"), f"{tool}: config.sandbox.fs.write", environ, cwd))
    limits = _limits(raw.get("limits"), tool, base.limits)
    return Profile(network=network or (), read=read, write=write, limits=limits)


def _network(value: Any, tool: str) -> list[str]:
    if value in (None, "none", False):
        return []
    if not isinstance(value, list):
        raise ConfigError(f"{tool}: config.sandbox.network must be a list of host:port, not {value!r}")
    out = []
    for item in value:
        text = str(item).strip().lower()
        m = _HOST_PORT.match(text)
        if m is None or not 0 < int(m.group(1)) < 65536:
            raise ConfigError(
                f"{tool}: config.sandbox.network entry {item!r} is not host:port",
                hint='write each destination as "api.example.com:443" or "127.0.0.1:8080"',
            )
        out.append(text)
    return sorted(set(out))


def _paths(value: Any, where: str, environ: Mapping[str, str], cwd: Path | None) -> list[str]:
    if value is None:
        return []
    if not isinstance(value, list):
        raise ConfigError(f"{where} must be a list of paths")
    out = []
    for item in value:
        text = expand_vars(str(item), environ)
        if not text.strip():
            if variables_in(str(item)):  # "${KIWI_DENO_DIR:-}": where the variable is unset, no grant
                continue
            raise ConfigError(f"{where}: an empty path grants nothing; remove it")
        path = Path(text).expanduser()
        if not path.is_absolute():
            path = (cwd or Path.cwd()) / path
        resolved = Path(os.path.realpath(path))
        if not resolved.exists():
            raise ConfigError(
                f"{where}: {text!r} does not exist on this machine ({resolved})",
                hint=_missing_path_hint(str(item), text, environ),
            )
        if (link := _planted_link(Path(os.path.abspath(path)))) is not None:
            # the registry narrows paths as text: a symlink that a sandboxed tool with write
            # access may have planted must not carry a path somewhere its text does not say
            raise ConfigError(
                f"{where}: {text!r} goes through the symlink {link}, which a sandbox could have made",
                hint="an admin writes the real path in the sandbox profile",
            )
        if resolved == Path("/"):
            raise ConfigError(f"{where}: the whole filesystem cannot be mounted into a sandbox")
        out.append(str(resolved))
    return sorted(set(out))


# Settings the seed's manifests read for a path, what they are, and where Kiwi's clone has it.
_PATH_SETTINGS = {"KIWI_NODE_MODULES": ("Kiwi's node_modules, where `make deps` put the MCP servers", "node_modules")}


def _missing_path_hint(item: str, text: str, environ: Mapping[str, str]) -> str | None:
    """What to set when a path that does not exist came from a ${VAR} (unset: its default, read
    from the working directory): the variable, and for a setting of Kiwi's own, its value here."""
    names = sorted(variables_in(item))
    if not names:
        return None
    name = names[0]
    unset = "" if environ.get(name) else ", which is not set, so it was looked for in the working directory"
    if name not in _PATH_SETTINGS:
        return f"{text!r} comes from ${{{name}}}{unset}: export {name}=<its path on this machine>"
    meaning, in_clone = _PATH_SETTINGS[name]
    here = Path(__file__).resolve().parents[2] / in_clone
    value = str(here) if here.exists() else f"<{meaning.split(',')[0]}>"
    return f"{text!r} comes from ${{{name}}}{unset}: export {name}={value} ({meaning})"


def _planted_link(path: Path) -> Path | None:
    """The first symlink on `path` that a sandboxed process could have written: as root the
    runner's sandboxes write as nobody, so a root-owned link is the machine's own; otherwise
    they write as the runner's uid, and any link is suspect."""
    current = Path(path.anchor)
    for part in path.parts[1:]:
        current = current / part
        try:
            st = os.lstat(current)
        except OSError:
            return None
        if stat.S_ISLNK(st.st_mode) and not (os.geteuid() == 0 and st.st_uid == 0):
            return current
    return None


def _limits(value: Any, tool: str, base: Limits) -> Limits:
    if value is None:
        return base
    if not isinstance(value, Mapping):
        raise ConfigError(f"{tool}: config.sandbox.limits must be a mapping")
    merged = base.as_dict()
    for key, raw in value.items():
        if key not in DEFAULT_LIMITS:
            raise ConfigError(f"{tool}: unknown sandbox limit {key!r}", hint="limits are: " + ", ".join(DEFAULT_LIMITS))
        if isinstance(raw, bool) or not isinstance(raw, int | float) or not 0 < raw < 2**31:
            raise ConfigError(f"{tool}: config.sandbox.limits.{key} must be a positive number, not {raw!r}")
        merged[key] = raw
    return Limits(
        memory_mb=int(merged["memory_mb"]),
        pids=int(merged["pids"]),
        cpu_s=float(merged["cpu_s"]),
        file_mb=int(merged["file_mb"]),
        open_files=int(merged["open_files"]),
    )
