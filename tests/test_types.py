"""The type checker is clean: mypy over the runner, the scripts and the benches, as pyproject's [tool.mypy]
configures it (`make lint` runs the same), so `make test` and CI fail on a type error."""

from __future__ import annotations

import subprocess
import sys
from pathlib import Path

import pytest

pytestmark = pytest.mark.slow  # mypy over the whole tree

ROOT = Path(__file__).resolve().parent.parent


def test_mypy_finds_no_type_error() -> None:
    done = subprocess.run(
        [sys.executable, "-m", "mypy", "--no-error-summary"], cwd=ROOT, capture_output=True, text=True, timeout=300
    )
    assert done.returncode == 0, done.stdout + done.stderr
