"""Every client scenario of the official MCP conformance suite, run against Kiwi's MCP client
(the pool of runner/mcp_client/pool.py with the OAuth provider of runner/mcp_client/oauth/, driven by
runner/mcp_client/oauth/conformance_client.py) and compared with client_not_applicable.yaml.

The suite starts its own test server (and, for auth/*, its own authorization server) per
scenario, runs the client command with the server's URL appended and the scenario in
MCP_CONFORMANCE_SCENARIO, and judges what it saw. A scenario passes when the suite says so
(exit 0, "OVERALL: PASSED": no FAILURE or WARNING check and the client exited 0). A scenario
the file does not name must pass; one it names must still fail, so the file stays true.
"""

from __future__ import annotations

import re
import subprocess
import sys
from concurrent.futures import ThreadPoolExecutor
from functools import cache
from pathlib import Path

import pytest
import yaml

from tests.conformance.server_suite import NODE, SUITE
from tests.conftest import ROOT

pytestmark = pytest.mark.slow  # the MCP conformance suite, on Node

EXPECTED = Path(__file__).with_name("client_not_applicable.yaml")
CLIENT_COMMAND = f"{sys.executable} -m runner.mcp_client.oauth.conformance_client"
SCENARIO_TIMEOUT_MS = 30_000
_LISTED = re.compile(r"^\s+- (\S+) \[([^\]]*)\]\s*$")
# The 14 authorization scenarios of spec 2025-11-25 / 2025-06-18 that issue 17 names: never excusable.
REQUIRED = frozenset(
    {
        "initialize",
        "tools_call",
        "auth/metadata-default",
        "auth/metadata-var1",
        "auth/metadata-var2",
        "auth/metadata-var3",
        "auth/basic-cimd",
        "auth/scope-from-www-authenticate",
        "auth/scope-from-scopes-supported",
        "auth/scope-omitted-when-undefined",
        "auth/scope-step-up",
        "auth/scope-retry-limit",
        "auth/token-endpoint-auth-basic",
        "auth/token-endpoint-auth-post",
        "auth/token-endpoint-auth-none",
        "auth/pre-registration",
    }
)


def _suite(*args: str, timeout: float) -> subprocess.CompletedProcess[str]:
    if not (NODE.exists() and SUITE.exists()):
        pytest.fail(f"{SUITE} or {NODE} is missing: `make deps` installs them (package.json)")
    return subprocess.run(
        [str(NODE), str(SUITE), *args], cwd=ROOT, capture_output=True, text=True, timeout=timeout, check=False
    )


@cache
def client_scenarios() -> tuple[str, ...]:
    done = _suite("list", "--client", timeout=60)
    assert done.returncode == 0, done.stderr or done.stdout
    found = tuple(m[1] for m in map(_LISTED.match, done.stdout.splitlines()) if m)
    assert found, f"conformance list named no client scenario:\n{done.stdout}"
    return found


@cache
def outcomes() -> dict[str, tuple[bool, str]]:
    """Each scenario: (passed, the suite's output), run eight at a time (each has its own ports)."""

    def one(scenario: str) -> tuple[str, tuple[bool, str]]:
        done = _suite(
            "client",
            "--command",
            CLIENT_COMMAND,
            "--scenario",
            scenario,
            "--timeout",
            str(SCENARIO_TIMEOUT_MS),
            timeout=SCENARIO_TIMEOUT_MS / 1000 + 60,
        )
        output = done.stdout + done.stderr
        return scenario, (done.returncode == 0 and "OVERALL: PASSED" in output, output)

    with ThreadPoolExecutor(max_workers=8) as pool:
        return dict(pool.map(one, client_scenarios()))


def expected() -> dict[str, str]:
    listed = yaml.safe_load(EXPECTED.read_text()) or {}
    return dict(listed.get("not_applicable") or {})


def test_the_file_names_only_scenarios_the_suite_has_each_with_a_reason() -> None:
    named = expected()
    assert set(named) <= set(client_scenarios()), f"not in the suite: {sorted(set(named) - set(client_scenarios()))}"
    assert all(isinstance(r, str) and len(r.split()) >= 8 for r in named.values()), "every entry needs its reason"
    assert not (REQUIRED & set(named)), f"issue 17 requires these to pass: {sorted(REQUIRED & set(named))}"
    assert set(client_scenarios()) >= REQUIRED, "the suite no longer lists a scenario issue 17 names"


@pytest.mark.parametrize("scenario", client_scenarios())
def test_client_scenario(scenario: str) -> None:
    passed, output = outcomes()[scenario]
    excused = expected()
    if scenario in excused:
        assert not passed, f"{scenario} passes now: delete its entry from {EXPECTED.name}"
    else:
        assert passed, f"{scenario} failed:\n{output[-6000:]}"
