"""`make demo`, the README's first command, runs and shows the registry working."""

from __future__ import annotations

import os
import subprocess
import sys

from tests.conftest import ROOT


def test_the_demo_shows_a_chain_a_plan_and_search_results(database_url: str) -> None:
    result = subprocess.run(
        [sys.executable, str(ROOT / "scripts" / "demo.py")],
        capture_output=True,
        text=True,
        timeout=120,
        env={**os.environ, "KIWI_DATABASE_URL": database_url},
        check=False,
    )
    assert result.returncode == 0, result.stderr
    out = result.stdout
    assert "chain:      format_bytes -> python_runtime -> subprocess" in out
    assert 'requires          ["humanize==4.12.3"]' in out, "the plan shows the merged config"
    assert 'tool "no_such_tool" not found' in out, "the batch reports a bad id beside the good ones"
    assert "hello_world" in out.split("search_tools('helo wrld')")[1].split("==")[0], "a typo still finds the tool"
