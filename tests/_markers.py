"""The suite's two markers, which choose what `make test-fast` leaves out (`make test` runs all).

`db`, set by itself: a test needs the stack's database when it asks for a fixture that does
(directly or through another fixture), so no one has to remember a marker. A test that reaches
the database some other way says so with `pytestmark = pytest.mark.db`.

`slow`: a test that waits (on a timeout, a sleep, a process or a server starting), that starts a
toolchain or servers of its own (mypy, MkDocs, Deno, the MCP conformance suite, the npm MCP
servers, a PostgreSQL cluster), or that takes a fifth of a second or more for another reason.
A test says so with `@pytest.mark.slow`, a module with `pytestmark = pytest.mark.slow`; a
Hypothesis test is marked by itself, as each runs its examples by the hundred.

`make test-fast` runs `pytest -m "not db and not slow"`: an answer in seconds, with no stack.
Such a run does not even import a module marked slow as a whole (some list their cases by
starting a program), and it names at its end any test it ran that took over SLOW_SECONDS, so
the set stays fast: mark that test `slow`, or make it quicker.

Loaded from pyproject's addopts (`-p tests._markers`), apart from conftest.py."""

from __future__ import annotations

import re
from pathlib import Path

import pytest

# the session fixtures every database fixture stands on (tests/conftest.py)
DATABASE_FIXTURES = frozenset({"database_url", "runner_database_url"})
# what a test of the fast set may take (setup, call and teardown) before the run names it; above
# the fifth of a second that makes a test slow, as a busy machine stretches every duration
SLOW_SECONDS = 1.0
_SLOW_MODULE = re.compile(r"^pytestmark = pytest\.mark\.slow\b", re.MULTILINE)

_took: dict[str, float] = {}


def pytest_configure(config: pytest.Config) -> None:
    config.addinivalue_line("markers", "db: needs the stack's database (set from the fixtures a test asks for)")
    config.addinivalue_line(
        "markers", "slow: waits, starts a toolchain or servers, or takes over a fifth of a second (not in test-fast)"
    )


def leaves_slow_out(markexpr: str) -> bool:
    """Whether `-m markexpr` keeps no slow test: names joined by `and`, one of them `not slow`.
    Any other expression (with `or`, parentheses or arguments) is left to pytest to judge."""
    if not re.fullmatch(r"[\w\s]*", markexpr) or "or" in markexpr.split():
        return False
    return "not slow" in " ".join(markexpr.split()).split(" and ")


def pytest_ignore_collect(collection_path: Path, config: pytest.Config) -> bool | None:
    """In a run that leaves slow tests out, a test module marked slow as a whole is not imported."""
    if not (collection_path.name.startswith("test_") and collection_path.suffix == ".py"):
        return None
    if leaves_slow_out(config.option.markexpr) and _SLOW_MODULE.search(collection_path.read_text()):
        return True
    return None


def _is_hypothesis_test(item: pytest.Item) -> bool:
    return bool(getattr(getattr(item, "obj", None), "is_hypothesis_test", False))


def pytest_collection_modifyitems(items: list[pytest.Item]) -> None:
    for item in items:
        if DATABASE_FIXTURES.intersection(getattr(item, "fixturenames", ())):
            item.add_marker(pytest.mark.db)
        if _is_hypothesis_test(item):
            item.add_marker(pytest.mark.slow)


def pytest_runtest_logreport(report: pytest.TestReport) -> None:
    if not ({"db", "slow"} & set(report.keywords)):
        _took[report.nodeid] = _took.get(report.nodeid, 0.0) + report.duration


def pytest_terminal_summary(terminalreporter: pytest.TerminalReporter) -> None:
    over = sorted(((t, n) for n, t in _took.items() if t > SLOW_SECONDS), reverse=True)
    if not over:
        return
    terminalreporter.section("tests of make test-fast that took too long")
    terminalreporter.write_line(f"over {SLOW_SECONDS:g} s, marked neither slow nor db (tests/_markers.py):")
    for took, nodeid in over:
        terminalreporter.write_line(f"  {took:.2f}s {nodeid}")
