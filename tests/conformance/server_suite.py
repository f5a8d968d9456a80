"""The official MCP conformance suite (`@modelcontextprotocol/conformance`, pinned in package.json
with the Node 22 it needs, installed by `make deps`) run against an MCP server: the server
scenarios it has, one run of them all, and each scenario's verdict.

The suite's CLI (0.1.16, dist/index.js):

    conformance list --server                 "  - <scenario> [<spec version>,...]" per scenario
    conformance server --url URL --suite all -o DIR
                                              every server scenario, each connecting afresh;
                                              DIR/server-<scenario>-<ISO time>/checks.json each

`--spec-version V` only filters which scenarios run (each runs the same client code whatever
version it is listed for), so running `--suite all` once covers every version the suite lists.
A check's status is SUCCESS, FAILURE, WARNING or INFO; like the suite's own `--expected-failures`
baseline, a scenario fails on any FAILURE or WARNING. A scenario that throws outside its checks
writes no checks.json: it did not run, which fails it too. The exit status is not read (it is 1
whenever anything failed); the checks are.
"""

from __future__ import annotations

import json
import re
import subprocess
from dataclasses import dataclass, field
from functools import cache
from pathlib import Path
from typing import Any

from tests.conftest import ROOT

__all__ = ["NODE", "SUITE", "Outcome", "SuiteRun", "run_server_suite", "server_scenarios"]

NODE = ROOT / "node_modules/.bin/node"  # npm package node@22 (package.json)
SUITE = ROOT / "node_modules/.bin/conformance"
RUN_TIMEOUT_S = 180  # the whole suite takes about a second against a local server
_LISTED = re.compile(r"^\s+- (\S+) \[([^\]]*)\]\s*$")
_RESULT_DIR = re.compile(r"^server-(.+)-\d{4}-\d{2}-\d{2}T[\d-]+Z$")


def _suite(*args: str, timeout: float) -> subprocess.CompletedProcess[str]:
    if not (NODE.exists() and SUITE.exists()):
        raise FileNotFoundError(f"{SUITE} or {NODE} is missing: `make deps` installs them (package.json)")
    return subprocess.run(
        [str(NODE), str(SUITE), *args], cwd=ROOT, capture_output=True, text=True, timeout=timeout, check=False
    )


@cache
def server_scenarios() -> dict[str, tuple[str, ...]]:
    """Every server scenario of the installed suite, with the spec versions it is listed for."""
    done = _suite("list", "--server", timeout=60)
    if done.returncode != 0:
        raise RuntimeError(f"conformance list failed ({done.returncode}): {done.stderr or done.stdout}")
    found = {m[1]: tuple(v for v in m[2].split(",") if v) for m in map(_LISTED.match, done.stdout.splitlines()) if m}
    if not found:
        raise RuntimeError(f"conformance list named no server scenario:\n{done.stdout}")
    return found


@dataclass(frozen=True)
class Outcome:
    """One scenario's result: its checks as the suite wrote them (empty if it did not run)."""

    scenario: str
    checks: list[dict[str, Any]] = field(default_factory=list)

    @property
    def ran(self) -> bool:
        return bool(self.checks)

    def problems(self) -> list[str]:
        """Each FAILURE or WARNING check as `id: message`; 'did not run' if there were no checks."""
        if not self.ran:
            return ["did not run (no checks.json): see the suite's output"]
        return [
            f"{c.get('id')}: {c['status']} {c.get('errorMessage') or c.get('description') or ''}".rstrip()
            for c in self.checks
            if c.get("status") in ("FAILURE", "WARNING")
        ]

    def successes(self) -> list[dict[str, Any]]:
        return [c for c in self.checks if c.get("status") == "SUCCESS"]


@dataclass(frozen=True)
class SuiteRun:
    outcomes: dict[str, Outcome] = field(repr=False)
    output: str = field(repr=False)  # the suite's stdout and stderr, for a failure's message
    exit_status: int = 0


def run_server_suite(url: str, out_dir: Path) -> SuiteRun:
    """Run every server scenario (`--suite all`) against the MCP endpoint `url`; read each
    scenario's checks from `out_dir` (which must be new or empty)."""
    out_dir.mkdir(parents=True, exist_ok=True)
    if any(out_dir.iterdir()):
        raise ValueError(f"{out_dir} is not empty: results of an earlier run would be read as this one's")
    done = _suite("server", "--url", url, "--suite", "all", "-o", str(out_dir), timeout=RUN_TIMEOUT_S)
    outcomes = {name: Outcome(name) for name in server_scenarios()}
    for result in sorted(out_dir.iterdir()):
        match = _RESULT_DIR.match(result.name)
        checks_file = result / "checks.json"
        if match and checks_file.is_file():
            name = match[1]
            outcomes[name] = Outcome(name, json.loads(checks_file.read_text()))
    return SuiteRun(outcomes, done.stdout + done.stderr, done.returncode)
