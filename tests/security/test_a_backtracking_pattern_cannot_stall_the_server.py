"""Finding: one tenant's regular expression stalled everyone. A parameter `pattern: "^(a+)+$"`
was accepted at publish; jsonschema-rs refused a 27-character value at once, but the refusal
was then described by the pure-Python jsonschema, whose `pattern` runs Python's backtracking
`re` on the server's event loop: 14 s for 27 characters, hours for 40.

Every tenant pattern now runs on jsonschema-rs's linear-time engine (runner/core/linear_regex.py):
parameter and output schemas are verdict and description both by jsonschema-rs, a runtime's
validation patterns search the same engine, and permission globs match without a regular
expression. A pattern that needs backtracking (lookaround, backreferences) is refused, saying so.

Today's code would hang on these inputs for hours, so each one that could runs in a child
process under run_kiwi's deadline (subprocess.TimeoutExpired fails the test); no timing is asserted.
"""

from __future__ import annotations

import subprocess
import sys
from collections.abc import Callable
from pathlib import Path

import pytest

from runner import InvalidParameters, Refused
from runner.core.params import validate_params
from tests.conftest import ROOT
from tests.kiwi_cli import kiwi_env, run_kiwi

EVIL = "^(a+)+$"
ALMOST = "a" * 40 + "!"  # 40 characters that almost match: 2**40 ways for a backtracking engine


def test_a_refused_value_for_a_backtracking_pattern_is_invalid_parameters(
    database_url: str, tmp_path: Path, publish_tool: Callable[..., str]
) -> None:
    tool = publish_tool(
        "redos",
        {
            "tool_type": "script",
            "executor": "bash_runtime",
            "parameters": {"type": "object", "properties": {"x": {"type": "string", "pattern": EVIL}}},
        },
        {"run.sh": "echo ran\n"},
        entrypoint="run.sh",
    )
    env = kiwi_env(database_url, tmp_path / "cache")
    done = run_kiwi(["run", tool, "--params", f'{{"x": "{ALMOST}"}}'], cwd=tmp_path, env=env, timeout=120)
    assert done.code == 2, done.err
    assert f"x: must be text matching {EVIL}" in done.err and ALMOST not in done.err
    assert "Traceback" not in done.err and "ran" not in done.out
    good = run_kiwi(["run", tool, "--params", '{"x": "aaaa"}'], cwd=tmp_path, env=env, timeout=120)
    assert good.code == 0 and "ran" in good.out, good.err


def test_an_output_refused_by_a_backtracking_pattern_is_a_mismatch(
    database_url: str, tmp_path: Path, publish_tool: Callable[..., str]
) -> None:
    tool = publish_tool(
        "redos_out",
        {
            "tool_type": "script",
            "executor": "bash_runtime",
            "outputs": {"type": "object", "properties": {"x": {"type": "string", "pattern": EVIL}}},
        },
        {"run.sh": f"""echo '{{"x": "{ALMOST}"}}'\n"""},
        entrypoint="run.sh",
    )
    done = run_kiwi(["run", tool], cwd=tmp_path, env=kiwi_env(database_url, tmp_path / "cache"), timeout=120)
    assert done.code == 1 and f"output.x: must be text matching {EVIL}" in done.err, done.err
    assert "Traceback" not in done.err


def test_a_runtime_validation_pattern_searches_in_linear_time(
    database_url: str, tmp_path: Path, publish_tool: Callable[..., str]
) -> None:
    """A tool's own validation rule, a backtracking pattern, over a file that almost matches it."""
    rule = {"type": "pattern_check", "patterns": {"evil": ["(a+)+$"]}, "block": True}
    tool = publish_tool(
        "redos_rule",
        {"tool_type": "script", "executor": "bash_runtime", "config": {"validation": {"rules": [rule]}}},
        {"run.sh": f"# {ALMOST}\necho ran\n"},
        entrypoint="run.sh",
    )
    done = run_kiwi(["run", tool], cwd=tmp_path, env=kiwi_env(database_url, tmp_path / "cache"), timeout=120)
    assert done.code == 0 and "ran" in done.out, done.err  # `$` after the a's is a line end only past "!"


def test_a_permission_glob_of_many_stars_matches_in_polynomial_time() -> None:
    code = (
        "from runner.policy.permissions import covers\n"
        f"print(covers({'*a' * 12 + '*b'!r}, {'a' * 300!r}), covers('*a*b', 'xaxb'))\n"
    )
    done = subprocess.run([sys.executable, "-c", code], cwd=ROOT, capture_output=True, text=True, timeout=120)
    assert done.stdout.split() == ["False", "True"], done.stderr


@pytest.mark.parametrize("pattern", ["^(?=a)", "^(?!a)", "(?<=a)b", "(a)\\1"])
def test_a_schema_pattern_that_needs_backtracking_is_refused_saying_so(pattern: str) -> None:
    schema = {"type": "object", "properties": {"x": {"type": "string", "pattern": pattern}}}
    with pytest.raises(Refused, match=r"properties/x/pattern: .* need no backtracking"):
        validate_params("t", schema, {"x": "a"})


def test_described_refusals_are_capped() -> None:
    schema = {"type": "object", "properties": {"x": {"type": "array", "items": {"type": "string", "pattern": "^b"}}}}
    with pytest.raises(InvalidParameters) as raised:
        validate_params("t", schema, {"x": ["a"] * 5000})
    assert len(raised.value.problems) <= 51 and raised.value.problems[-1].startswith("(and ")
