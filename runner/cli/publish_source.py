"""What `kiwi publish TARGET` publishes: a tool directory, a bare script, or a local space's
tool (with what the space adds: runner/core/script_tools.py). A Python tool whose requires
were found in its imports has them locked with uv (`uv pip compile`: every distribution
pinned, those they depend on included) first, so it installs the same packages wherever it
runs."""

from __future__ import annotations

import shutil
import subprocess
import sys
from dataclasses import replace
from pathlib import Path
from typing import TYPE_CHECKING

from ..errors import UsageError

if TYPE_CHECKING:
    from ..core.tool_dir import ToolDir

__all__ = ["locked", "source_of"]

LOCK_TIMEOUT_S = 120


def source_of(target: str) -> ToolDir:
    """The tool `target` names: a directory holding tool.yaml, a .py or .sh file, or the
    tool_id of a local space's tool; its detected requires locked."""
    from ..config import Settings
    from ..core.script_tools import SCRIPT_SUFFIXES, load_bare, with_detected_requires
    from ..core.tool_dir import ToolDirError, load_tool_dir
    from ..registry.spaces import find

    path = Path(target)
    try:
        if path.is_dir():
            tool = with_detected_requires(load_tool_dir(path))
        elif path.is_file() and path.suffix in SCRIPT_SUFFIXES:
            tool = with_detected_requires(load_bare(path))
        else:
            local = find(target, Settings.load())
            if local is None:
                raise UsageError(
                    f"{target}: not a directory or a script, nor a tool of a local space",
                    hint="give a directory holding tool.yaml, a .py or .sh file, or the tool_id of a tool in "
                    ".ai/tools or ~/.ai/tools",
                )
            tool = local.load()
    except ToolDirError as e:
        raise UsageError(str(e), hint="a tool directory holds tool.yaml beside its files") from e
    return locked(tool)


def _uv() -> str:
    beside = Path(sys.executable).parent / "uv"
    found = str(beside) if beside.is_file() else shutil.which("uv")
    if not found:
        raise UsageError(
            "uv is needed to lock the requires found in the tool's imports",
            hint="install uv, or write config.requires in tool.yaml",
        )
    return found


def locked(tool: ToolDir) -> ToolDir:
    """`tool` with its detected requires pinned by uv; a tool that wrote its requires, as it is."""
    if not tool.detected:
        return tool
    try:
        done = subprocess.run(
            [_uv(), "pip", "compile", "-", "--quiet", "--no-header", "--no-annotate"],
            input="\n".join(tool.detected) + "\n",
            capture_output=True,
            text=True,
            timeout=LOCK_TIMEOUT_S,
            check=False,
        )
    except subprocess.TimeoutExpired:
        done = subprocess.CompletedProcess([], 1, "", f"uv took more than {LOCK_TIMEOUT_S} s")
    if done.returncode != 0:
        said = (done.stderr or done.stdout).strip().splitlines()
        raise UsageError(
            f"could not lock the requires found in the tool's imports ({', '.join(tool.detected)}): "
            + (said[-1] if said else f"uv exited {done.returncode}"),
            hint="write config.requires in tool.yaml (an import that is not a package: name its module's file)",
        )
    pins = [line.strip() for line in done.stdout.splitlines() if line.strip() and not line.startswith("#")]
    config = {**tool.manifest.get("config", {}), "requires": pins}
    return replace(tool, manifest={**tool.manifest, "config": config})
