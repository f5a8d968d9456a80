"""The markers `make test-fast` chooses by (tests/_markers.py): what it leaves out, what it does
not even import, and the long tests it names so the fast set stays fast."""

from __future__ import annotations

import os
import subprocess
import sys
import textwrap
from pathlib import Path

import pytest

from tests._markers import leaves_slow_out
from tests.conftest import ROOT


@pytest.mark.parametrize(
    ("markexpr", "left_out"),
    [
        ("not db and not slow", True),
        ("not slow", True),
        ("  not   slow  and  not db ", True),
        ("", False),
        ("not db", False),
        ("slow", False),
        ("not not slow", False),
        ("db or not slow", False),  # keeps a slow db test
        ("(not slow)", False),  # parentheses: left to pytest
        ("not slowest", False),
    ],
)
def test_only_a_conjunction_naming_not_slow_leaves_the_slow_modules_unimported(markexpr: str, left_out: bool) -> None:
    assert leaves_slow_out(markexpr) is left_out


def _pytest(project: Path, *args: str) -> str:
    """pytest with tests/_markers.py as its only plugin, run on a project of a test's own."""
    (project / "pytest.ini").write_text("[pytest]\n")
    done = subprocess.run(
        [sys.executable, "-m", "pytest", "-p", "tests._markers", "-p", "no:cacheprovider", "-q", *args, str(project)],
        cwd=project,
        env={**os.environ, "PYTHONPATH": str(ROOT)},
        capture_output=True,
        text=True,
        timeout=120,
        check=False,
    )
    return done.stdout + done.stderr


PROJECT = {
    "conftest.py": """
        import pytest

        @pytest.fixture
        def database_url():
            return "postgresql://"
    """,
    "test_whole.py": """
        import pathlib
        import pytest

        pathlib.Path("imported").touch()  # what importing this module leaves behind
        pytestmark = pytest.mark.slow

        def test_in_a_slow_module():
            pass
    """,
    "test_some.py": """
        import pytest
        from hypothesis import given, strategies as st

        def test_quick():
            pass

        @pytest.mark.slow
        def test_marked():
            pass

        @given(st.integers())
        def test_fuzzed(n):
            pass

        def test_on_the_database(database_url):
            pass
    """,
}


@pytest.mark.slow
def test_the_fast_set_leaves_out_db_slow_and_hypothesis_tests_and_never_imports_a_slow_module(tmp_path: Path) -> None:
    for name, text in PROJECT.items():
        (tmp_path / name).write_text(textwrap.dedent(text))
    fast = _pytest(tmp_path, "--collect-only", "-m", "not db and not slow")
    assert [line for line in fast.splitlines() if "::" in line] == ["test_some.py::test_quick"], fast
    assert not (tmp_path / "imported").exists()
    everything = _pytest(tmp_path, "--collect-only")
    assert "test_whole.py::test_in_a_slow_module" in everything and "test_some.py::test_fuzzed" in everything
    assert (tmp_path / "imported").exists(), "only a run that leaves slow tests out skips the module"
    slow = _pytest(tmp_path, "--collect-only", "-m", "slow")
    assert sorted(line for line in slow.splitlines() if "::" in line) == [
        "test_some.py::test_fuzzed",
        "test_some.py::test_marked",
        "test_whole.py::test_in_a_slow_module",
    ], slow
    database = _pytest(tmp_path, "--collect-only", "-m", "db")
    assert [line for line in database.splitlines() if "::" in line] == ["test_some.py::test_on_the_database"]


@pytest.mark.slow
def test_a_long_test_left_in_the_fast_set_is_named_at_the_end(tmp_path: Path) -> None:
    (tmp_path / "test_long.py").write_text(
        textwrap.dedent(
            """
            import time
            import pytest

            def test_long():
                time.sleep(1.2)

            @pytest.mark.slow
            def test_long_and_marked():
                time.sleep(1.2)

            def test_quick():
                pass
            """
        )
    )
    out = _pytest(tmp_path)
    assert "3 passed" in out, out
    named = out.split("tests of make test-fast that took too long", 1)[1]
    assert "test_long.py::test_long\n" in named
    assert "test_long_and_marked" not in named and "test_quick" not in named
