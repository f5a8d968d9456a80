"""`kiwi --version`: the installed package's version, and the commit when kiwi runs from a git
checkout (where the version alone does not say which code runs). Worked out only when asked:
every other command starts without it."""

from __future__ import annotations

import argparse
import sys
from collections.abc import Sequence
from pathlib import Path
from typing import Any

DISTRIBUTION = "kiwi"
CHECKOUT = Path(__file__).resolve().parents[2]  # the repository root, when run from a clone


def package_version() -> str:
    """The distribution's version (pyproject.toml's, once installed), or a note that it is not installed."""
    from importlib import metadata

    try:
        return metadata.version(DISTRIBUTION)
    except metadata.PackageNotFoundError:
        return "(not installed)"


def checkout_commit(root: Path = CHECKOUT) -> str | None:
    """The short commit of the git checkout kiwi runs from, with `-dirty` for uncommitted
    changes; None when it is not a checkout or git is missing."""
    import subprocess

    if not (root / ".git").exists():
        return None
    try:
        done = subprocess.run(
            ["git", "-C", str(root), "describe", "--always", "--dirty", "--abbrev=12"],
            capture_output=True,
            text=True,
            timeout=5,
            check=False,
        )
    except (OSError, subprocess.SubprocessError):
        return None
    commit = done.stdout.strip()
    return commit if done.returncode == 0 and commit else None


def version_line() -> str:
    """`kiwi 0.1.0` or, from a checkout, `kiwi 0.1.0 (commit 1fe1c41a2b3c)`."""
    commit = checkout_commit()
    return f"kiwi {package_version()}" + (f" (commit {commit})" if commit else "")


class VersionAction(argparse.Action):
    """argparse's `version` action, with the line worked out only when --version is given."""

    def __init__(self, option_strings: Sequence[str], dest: str = argparse.SUPPRESS, **kwargs: Any) -> None:
        super().__init__(option_strings, dest, nargs=0, default=argparse.SUPPRESS, **kwargs)

    def __call__(self, parser: argparse.ArgumentParser, *_: Any) -> None:
        print(version_line(), file=sys.stdout)
        parser.exit()
