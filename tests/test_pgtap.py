"""Run every pgTAP file under supabase/tests/ through pg_prove: a failing SQL test fails pytest."""

from __future__ import annotations

import shutil
import subprocess
from pathlib import Path

import pytest

from tests.conftest import ROOT

PGTAP_DIR = ROOT / "supabase" / "tests"
PGTAP_FILES = sorted(PGTAP_DIR.rglob("*.test.sql"))


def test_pgtap_files_are_found() -> None:
    assert len(PGTAP_FILES) >= 10, f"expected the pgTAP suite under {PGTAP_DIR}"


@pytest.mark.parametrize("path", PGTAP_FILES, ids=lambda p: str(p.relative_to(PGTAP_DIR)))
def test_pgtap(path: Path, database_url: str) -> None:
    pg_prove = shutil.which("pg_prove")
    assert pg_prove, "pg_prove is missing: `make db` installs postgresql-15-pgtap"
    result = subprocess.run(
        [pg_prove, "--verbose", "--failures", "--dbname", database_url, str(path)],
        capture_output=True,
        text=True,
        timeout=600,
        check=False,
    )
    assert result.returncode == 0, f"{path.name} failed:\n{result.stdout}\n{result.stderr}"
    assert "Result: PASS" in result.stdout, result.stdout
