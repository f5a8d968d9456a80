"""`make demo`, the README's first command: the registry, then the seeded tools run end to end."""

from __future__ import annotations

import os
import subprocess
import sys

from tests.conftest import ROOT, runner_url


def test_the_demo_shows_the_registry_and_runs_every_seeded_kind_of_tool(database_url: str) -> None:
    result = subprocess.run(
        [sys.executable, str(ROOT / "scripts" / "demo.py")],
        capture_output=True,
        text=True,
        timeout=300,
        cwd=ROOT,
        env={**os.environ, "KIWI_DATABASE_URL": runner_url(database_url)},  # as `make demo` logs in
        check=False,
    )
    assert result.returncode == 0, result.stdout[-3000:] + result.stderr
    out = result.stdout
    assert "chain:      format_bytes -> python_runtime -> subprocess" in out
    assert 'requires          ["humanize==4.12.3"]' in out, "the plan shows the merged config"
    assert 'tool "no_such_tool" not found' in out, "the batch reports a bad id beside the good ones"
    assert "hello_world" in out.split("search_tools('helo wrld')")[1].split("==")[0], "a typo still finds the tool"
    # the runner part: each seeded kind ran through its chain
    assert '"greeting": "Hello, Ada!"' in out
    assert '"human": "117.7 MiB"' in out and "via format_bytes -> python_runtime -> subprocess" in out
    assert '"words": 10' in out and "via word_count -> node_runtime -> subprocess" in out
    assert '"output": {"message": "hello from kiwi"}' in out and '"executor_chain": ["http_echo", "http_client"]' in out
    assert "# Writing a Kiwi tool" in out
    assert "bytes: must be of type integer" in out and "(exit 2)" in out
    assert out.count("success  ") >= 5, "kiwi runs lists the runs just made"
    # the sandbox part: the escaping tool started its daemon, and none of the demo's is left
    assert "left a daemon behind" in out and "daemons left on the host: 0" in out
