"""Every server scenario of the official MCP conformance suite, run against `kiwi serve --transport
http` (real processes, on the test database) and compared with server_not_applicable.yaml.

A scenario the file does not name must pass. One it names as not applicable must still fail,
and one it names as pending is reported as XFAIL while it fails and fails the test once it
passes, so the file says what is true. The suite's fixtures that can be registry items are
published first under its names (server_fixtures.py).

Kiwi serves MCP two ways, and the suite runs against both:

    meta-tools  `kiwi serve`: search/load/execute/help, directives as prompts, knowledge as
                resources, logging, subscriptions
    direct      `kiwi serve --directive conformance_server_fixtures`: that directive's tool
                context (the published fixture tools) as ordinary MCP tools

A scenario that calls one of the suite's tools by name is judged on the direct server, the
protocol's basics on both, the rest on the meta-tools server (`servers_of`).

Some of the suite's checks accept an answer that proves nothing about Kiwi (an "Unknown tool"
error passes `tools-call-simple-text`; an empty list passes `prompts-list`); `hollow` refuses
those passes, so a scenario counts only when the fixture was reached.

The suite's client sends no token, so both servers run with `--insecure-no-auth` (loopback
only, acting as the local owner).
"""

from __future__ import annotations

import json
from collections.abc import Iterator
from dataclasses import dataclass, field
from pathlib import Path

import pytest
import yaml

from runner.testing.http_serving import kiwi_http_server
from tests.conformance.server_fixtures import (
    FIXTURE_DIRECTIVE,
    FIXTURE_KNOWLEDGE,
    FIXTURE_PROMPTS,
    published_fixtures,
)
from tests.conformance.server_suite import Outcome, SuiteRun, run_server_suite, server_scenarios

pytestmark = pytest.mark.slow  # the MCP conformance suite, on Node

EXPECTED = Path(__file__).with_name("server_not_applicable.yaml")
META_TOOLS, DIRECT = "meta-tools", "direct"
SERVE_ARGS: dict[str, tuple[str, ...]] = {
    META_TOOLS: ("--insecure-no-auth",),
    DIRECT: ("--insecure-no-auth", "--directive", FIXTURE_DIRECTIVE),
}
BASICS = frozenset(
    {"server-initialize", "ping", "tools-list", "server-sse-multiple-streams", "dns-rebinding-protection"}
)
CALLS_A_SUITE_TOOL = frozenset(
    {"json-schema-2020-12", "elicitation-sep1034-defaults", "elicitation-sep1330-enums", "server-sse-polling"}
)


def servers_of(scenario: str) -> tuple[str, ...]:
    """Which of Kiwi's servers a scenario is judged on."""
    if scenario in BASICS:
        return (META_TOOLS, DIRECT)
    if scenario.startswith("tools-call-") or scenario in CALLS_A_SUITE_TOOL:
        return (DIRECT,)
    return (META_TOOLS,)


def _expected() -> tuple[dict[str, str], dict[str, str]]:
    doc = yaml.safe_load(EXPECTED.read_text()) or {}
    return dict(doc.get("not_applicable") or {}), dict(doc.get("pending") or {})


NOT_APPLICABLE, PENDING = _expected()


@dataclass(frozen=True)
class Ran:
    suite: SuiteRun
    server_log: str = field(repr=False)


@pytest.fixture(scope="module")
def runs(database_url: str, tmp_path_factory: pytest.TempPathFactory) -> Iterator[dict[str, Ran]]:
    """The whole suite once against each server; the fixtures are removed before any verdict."""
    work = tmp_path_factory.mktemp("conformance")
    ran: dict[str, Ran] = {}
    with published_fixtures(database_url):
        for mode, args in SERVE_ARGS.items():
            with kiwi_http_server(database_url, work / mode, *args) as served:
                ran[mode] = Ran(run_server_suite(served.url, work / mode / "results"), served.stderr())
    yield ran


def hollow(outcome: Outcome) -> str | None:
    """Why a pass proves nothing about Kiwi, if it does not."""
    for check in outcome.successes():
        if "Unknown tool: " in json.dumps(check.get("details")):
            return "passed on Kiwi's 'Unknown tool' error: the fixture tool was never called"
    listed = [c.get("details") or {} for c in outcome.successes()]
    if outcome.scenario == "prompts-list":
        names = {n for d in listed for n in d.get("prompts") or []}
        if missing := sorted(set(FIXTURE_PROMPTS) - names):
            return f"prompts/list did not list the published fixture directives {missing} (listed: {sorted(names)})"
    if outcome.scenario == "resources-list":
        uris = [u for d in listed for u in d.get("resources") or []]
        if not any(u.startswith(f"kiwi://knowledge/{FIXTURE_KNOWLEDGE}@") for u in uris):
            return f"resources/list did not list kiwi://knowledge/{FIXTURE_KNOWLEDGE}@<version> (listed: {uris})"
    return None


def problems_of(scenario: str, runs: dict[str, Ran]) -> list[str]:
    """What fails in `scenario` on each server it is judged on, `[server] check: message` each."""
    found: list[str] = []
    for mode in servers_of(scenario):
        outcome = runs[mode].suite.outcomes[scenario]
        problems = outcome.problems() or [why for why in [hollow(outcome)] if why]
        found += [f"[{mode}] {p}" for p in problems]
    return found


def test_the_file_names_only_server_scenarios_each_once_with_a_reason() -> None:
    scenarios = server_scenarios()
    named = [*NOT_APPLICABLE, *PENDING]
    assert not (unknown := sorted(set(named) - set(scenarios))), f"{EXPECTED.name} names no such scenario: {unknown}"
    assert not (twice := sorted(set(NOT_APPLICABLE) & set(PENDING))), f"both not applicable and pending: {twice}"
    short = [name for name, why in {**NOT_APPLICABLE, **PENDING}.items() if not isinstance(why, str) or len(why) < 20]
    assert not short, f"give each of these a reason in {EXPECTED.name}: {short}"


def test_every_server_scenario_ran_on_both_servers(runs: dict[str, Ran]) -> None:
    for mode, ran in runs.items():
        missing = [name for name, outcome in ran.suite.outcomes.items() if not outcome.ran]
        assert not missing, f"[{mode}] no checks.json for {missing}; the suite said:\n{ran.suite.output[-4000:]}"


@pytest.mark.parametrize("scenario", sorted(server_scenarios()))
def test_server_scenario(runs: dict[str, Ran], scenario: str) -> None:
    problems = problems_of(scenario, runs)
    if scenario in NOT_APPLICABLE:
        assert problems, f"{scenario} passes: delete it from not_applicable in {EXPECTED.name}"
    elif scenario in PENDING:
        if problems:
            pytest.xfail(f"pending: {PENDING[scenario][:120]}... now: {problems[0][:160]}")
        pytest.fail(f"{scenario} passes now: delete it from pending in {EXPECTED.name}")
    else:
        tails = [f"kiwi serve ({m}), the end of its log:\n{runs[m].server_log[-2000:]}" for m in servers_of(scenario)]
        logs = "\n".join(tails)
        detail = "\n  ".join(problems)
        assert not problems, f"{scenario} fails:\n  {detail}\n{logs}"
