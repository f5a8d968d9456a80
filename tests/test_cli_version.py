"""`kiwi --version`: the installed package's version (importlib.metadata), and from a git
checkout the commit it runs; beside a command, `--version` stays that command's option."""

from __future__ import annotations

import re
import subprocess
from importlib import metadata
from pathlib import Path

from runner.cli.version import checkout_commit
from tests.conftest import ROOT
from tests.kiwi_cli import kiwi_env, run_kiwi


def test_version_prints_the_package_version_and_the_checkouts_commit(database_url: str, tmp_path: Path) -> None:
    done = run_kiwi(["--version"], cwd=tmp_path, env=kiwi_env(database_url, tmp_path / "cache"))
    assert done.code == 0 and done.err == ""
    head = subprocess.run(["git", "-C", str(ROOT), "rev-parse", "HEAD"], capture_output=True, text=True, check=True)
    match = re.fullmatch(r"kiwi (\S+) \(commit ([0-9a-f]{12})(-dirty)?\)\n", done.out)
    assert match is not None, done.out
    assert match.group(1) == metadata.version("kiwi")
    assert head.stdout.startswith(match.group(2))


def test_outside_a_checkout_there_is_no_commit(tmp_path: Path) -> None:
    assert checkout_commit(tmp_path) is None


def test_run_version_is_still_the_version_to_run(database_url: str, tmp_path: Path) -> None:
    env = kiwi_env(database_url, tmp_path / "cache")
    done = run_kiwi(["run", "hello_world", "--version", "1.0.0", "-p", "name=Ada", "--json"], cwd=tmp_path, env=env)
    assert done.code == 0, done.err
    assert done.json()["version"] == "1.0.0"
