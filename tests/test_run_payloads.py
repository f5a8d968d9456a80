"""A run's record keeps what it was given and gave back (tool_runs.payload): the parameters, the
output and stderr, every secret of the tool's config masked, cut to fit, and never anything that
would make the record refused. The real database, real processes."""

from __future__ import annotations

import json
from collections.abc import Callable
from typing import Any

import psycopg
import pytest

from runner import Runner
from runner.core.payloads import BUDGETS, MAX_PAYLOAD_BYTES, run_payload
from runner.core.records import MASK

pytestmark = pytest.mark.db

SECRET = "payload-secret-4f1e9a"


def payload_of(conn: psycopg.Connection, run_id: str | None) -> Any:
    assert run_id, "the run left no record"
    row = conn.execute("select payload from tool_runs where id = %s", (run_id,)).fetchone()
    assert row is not None, "no record"
    return row[0]


def bash_tool(publish_tool: Callable[..., str], script: str, **config: Any) -> str:
    manifest = {
        "tool_type": "script",
        "executor": "bash_runtime",
        "parameters": [{"name": "word", "type": "string", "required": False}],
        "config": config,
    }
    return publish_tool("payload", manifest, {"run.sh": script}, entrypoint="run.sh")


async def test_a_runs_record_keeps_its_parameters_output_and_stderr_with_secrets_masked(
    make_runner: Callable[..., Runner], publish_tool: Callable[..., str], conn: psycopg.Connection
) -> None:
    tool = bash_tool(
        publish_tool,
        'echo "token is $TOKEN" >&2\necho "{\\"said\\": \\"$KIWI_PARAM_WORD $TOKEN\\"}"\n',
        env={"TOKEN": "${KIWI_PAYLOAD_TEST_SECRET}"},
    )
    runner = make_runner(environ={"KIWI_PAYLOAD_TEST_SECRET": SECRET, "PATH": "/usr/bin:/bin"})
    result = await runner.run(tool, {"word": f"hello {SECRET}"})
    assert result.ok, result.error
    await runner.flush_records()
    payload = payload_of(conn, result.run_id)
    assert payload == {
        "params": {"word": f"hello {MASK}"},
        "output": {"said": f"hello {MASK} {MASK}"},
        "stderr": f"token is {MASK}\n",
        "truncated": [],
    }
    assert SECRET not in str(payload)


async def test_what_jsonb_cannot_hold_and_what_is_too_large_still_leaves_a_record(
    make_runner: Callable[..., Runner], publish_tool: Callable[..., str], conn: psycopg.Connection
) -> None:
    # NUL in stderr and stdout, 200 KB of output, a failing exit: the record is written anyway
    tool = bash_tool(
        publish_tool,
        "printf 'bad\\000byte\\n' >&2\nhead -c 300000 /dev/zero | tr '\\0' 'x' >&2\n"
        "printf 'a\\000b'\nhead -c 200000 /dev/zero | tr '\\0' 'y'\nexit 3\n",
    )
    runner = make_runner()
    result = await runner.run(tool, {"word": "x" * 40000})
    assert result.status == "error"
    await runner.flush_records()
    payload = payload_of(conn, result.run_id)
    assert sorted(payload["truncated"]) == ["output", "params", "stderr"]
    assert payload["stderr"].startswith("…") and payload["stderr"].endswith("x")  # stderr keeps its end
    assert isinstance(payload["output"], str) and payload["output"].endswith("…")
    assert "\x00" not in str(payload)
    row = conn.execute("select octet_length(payload::text) from tool_runs where id = %s", (result.run_id,)).fetchone()
    assert row is not None and row[0] <= MAX_PAYLOAD_BYTES


async def test_a_runner_told_to_keep_no_payloads_keeps_none(
    make_runner: Callable[..., Runner], make_settings: Callable[..., Any], conn: psycopg.Connection
) -> None:
    runner = make_runner(make_settings(run_payloads=False))
    result = await runner.run("hello_world", {"name": "Ada"})
    assert result.ok
    await runner.flush_records()
    assert payload_of(conn, result.run_id) is None


def test_each_part_fits_its_budget_whatever_its_characters() -> None:
    quotes = '"' * 100_000  # each doubles in JSON text
    payload = run_payload({"q": quotes}, ["\ud800" * 10, float("nan")], "\x00" * 50_000, [])
    assert payload["truncated"] == ["params", "stderr"]
    lone, nan = payload["output"]
    assert set(lone) == {"\ufffd"} and nan == "nan"  # what jsonb refuses, replaced
    for name, budget in BUDGETS.items():
        assert len(json.dumps(payload[name], ensure_ascii=False).encode()) <= budget, name
    assert "\x00" not in payload["stderr"]


def test_a_short_string_is_kept_whole_exactly_when_its_json_fits_the_budget() -> None:
    """A string short enough is known to fit without being written out; around that length,
    with characters JSON escapes longest (control characters, six bytes each) or not at all,
    a string is kept whole exactly when its JSON text fits."""
    from runner.core.payloads import _fit, _size

    budget = 120
    for char in ("\x01", "é", "a", "😀"):
        for length in range(10, 130):
            text = char * length
            fitted, cut = _fit(text, budget, tail=False)
            assert (fitted == text and not cut) == (_size(text) <= budget), (char, length)
            assert _size(fitted) <= budget
