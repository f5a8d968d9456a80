"""The kiwi CLI as a real process, as people and scripts run it (shared by the CLI tests)."""

from __future__ import annotations

import json
import os
import subprocess
import sys
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from tests.conftest import ROOT, runner_url


@dataclass
class Done:
    code: int
    out: str
    err: str

    def json(self) -> Any:
        return json.loads(self.out)


def kiwi_env(database_url: str, cache_dir: Path, **extra: str) -> dict[str, str]:
    """This environment without any KIWI_/SUPABASE_ setting of the developer's, pointed at the
    test database through the runner's login, as a user runs kiwi (runner_url), with its own
    cache (and whatever `extra` sets)."""
    env = {k: v for k, v in os.environ.items() if not k.startswith(("KIWI_", "SUPABASE_"))}
    env.update(KIWI_DATABASE_URL=runner_url(database_url), KIWI_CACHE_DIR=str(cache_dir), PYTHONPATH=str(ROOT), **extra)
    return env


def run_kiwi(args: tuple[str, ...] | list[str], *, cwd: Path, env: dict[str, str], timeout: float = 60) -> Done:
    proc = subprocess.run(
        [sys.executable, "-m", "runner.cli", *args], cwd=cwd, env=env, capture_output=True, text=True, timeout=timeout
    )
    return Done(proc.returncode, proc.stdout, proc.stderr)
