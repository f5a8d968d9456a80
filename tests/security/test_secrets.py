"""Secrets stay secret (issue 13, item 1), tried as an attacker would.

`${VAR}` is expanded once, only in strings that come from the registry (a tool's merged
config), before any `{placeholder}` is filled: a parameter or a file path is never
expanded, so a caller can neither read the runner's environment nor learn which
variables exist. Whatever a run reports (output, error, detail, progress) and whatever it
leaves behind (its tool_runs row) has every resolved secret value masked as `***`.

Real parts: the real database, tools published into it, real processes.
"""

from __future__ import annotations

import json
import os
from collections.abc import Callable
from urllib.parse import quote, quote_plus

import psycopg
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from runner import Runner, RunResult
from runner.core.records import MASK, scrub, scrub_deep, secret_values

SECRET = "kiwi-secret-3b1f0c9e7a"
ENV_VALUE = "kiwi-env-value-55d2aa"
UNSET = "KIWI_SURELY_NEVER_SET_4c1e"
# A runtime whose syntax check prints its last argument (a parameter) to stderr and fails,
# so whatever the parameter became reaches the error a caller sees.
ECHOING_CHECK = {
    "command": "sh",
    "args": ["{entrypoint}"],
    "validation": {"rules": [{"type": "syntax_check", "command": """sh -c 'echo "checked: $0" >&2; exit 1' {p}"""}]},
}
PARAMETERS = [{"name": "p", "type": "string", "required": True}]


@pytest.fixture
async def runner(make_runner: Callable[..., Runner]) -> Runner:
    environ = {**os.environ, "KIWI_TEST_SECRET": SECRET, "KIWI_TEST_ENV_VALUE": ENV_VALUE}
    environ.pop(UNSET, None)
    return make_runner(environ=environ)


async def everything_of(runner: Runner, conn: psycopg.Connection, result: RunResult) -> str:
    """All a run shows or leaves behind, as one text: its response, detail and tool_runs row."""
    assert result.run_id, "the run left no record"
    await runner.flush_records()
    cur = conn.execute("select * from tool_runs where id = %s", (result.run_id,))
    names = [d.name for d in cur.description or []]
    row = dict(zip(names, cur.fetchone() or (), strict=True))
    failure = result.failure.as_dict() if result.failure else None
    return json.dumps([result.as_json(), result.detail, result.warnings, failure, row], default=str)


def echoing_script(publish_tool: Callable[..., str]) -> str:
    runtime = publish_tool(
        "echo_check_runtime", {"tool_type": "runtime", "executor": "subprocess", "config": ECHOING_CHECK}
    )
    return publish_tool(
        "echo_check_script",
        {"tool_type": "script", "executor": runtime, "parameters": PARAMETERS},
        {"run.sh": "echo ran\n"},
        entrypoint="run.sh",
    )


async def test_a_parameter_is_never_expanded_by_a_syntax_check(
    runner: Runner, conn: psycopg.Connection, publish_tool: Callable[..., str]
) -> None:
    tool = echoing_script(publish_tool)
    result = await runner.run(tool, {"p": "${KIWI_TEST_SECRET}"})
    text = await everything_of(runner, conn, result)
    assert result.status == "error"
    assert "checked: ${KIWI_TEST_SECRET}" in (result.error or ""), result.error
    assert SECRET not in text


async def test_an_unset_variable_in_a_parameter_reveals_nothing(
    runner: Runner, conn: psycopg.Connection, publish_tool: Callable[..., str]
) -> None:
    """No oracle: a name that is set and one that is not give the same kind of answer,
    and neither is read from the environment."""
    tool = echoing_script(publish_tool)
    unset = await runner.run(tool, {"p": "${" + UNSET + "}"})
    set_ = await runner.run(tool, {"p": "${HOME}"})
    for result, name in ((unset, UNSET), (set_, "HOME")):
        assert "is not set" not in (result.error or "")
        assert f"checked: ${{{name}}}" in (result.error or ""), result.error
    assert type(unset.failure) is type(set_.failure)
    assert os.environ.get("HOME", "/nonexistent") not in (set_.error or "")


async def test_a_file_path_is_never_expanded(
    runner: Runner, conn: psycopg.Connection, publish_tool: Callable[..., str]
) -> None:
    """A publisher's entrypoint named like a variable is a file name, in the check and in the run."""
    path = "x${KIWI_TEST_SECRET}.sh"
    tool = publish_tool(
        "dollar_path", {"tool_type": "script", "executor": "bash_runtime"}, {path: "echo ran\n"}, entrypoint=path
    )
    result = await runner.run(tool)
    text = await everything_of(runner, conn, result)
    assert result.status == "success", result.error
    assert result.output == "ran"
    assert SECRET not in text


async def test_an_unset_variable_in_a_file_path_reveals_nothing(
    runner: Runner, publish_tool: Callable[..., str]
) -> None:
    path = "x${" + UNSET + "}.sh"
    tool = publish_tool(
        "dollar_unset_path", {"tool_type": "script", "executor": "bash_runtime"}, {path: "echo ran\n"}, entrypoint=path
    )
    result = await runner.run(tool)
    assert result.status == "success", result.error
    assert UNSET not in (result.error or "")


async def test_environment_steps_expand_the_registry_s_variables(
    runner: Runner, conn: psycopg.Connection, publish_tool: Callable[..., str]
) -> None:
    """`${VAR}` works in an environment step (it failed with "placeholder {VAR} has no value"),
    and the value the tool then prints is masked."""
    runtime = publish_tool(
        "env_var_runtime",
        {
            "tool_type": "runtime",
            "executor": "subprocess",
            "config": {
                "command": "cat",
                "args": ["{env_dir}/value"],
                "environment": {
                    "key": ["value-file"],
                    "steps": [
                        {
                            "command": "sh",
                            "args": ["-c", 'printf %s "$0" > "$1/value"', "${KIWI_TEST_ENV_VALUE}", "{env_dir}"],
                        }
                    ],
                },
            },
        },
    )
    tool = publish_tool(
        "env_var_script", {"tool_type": "script", "executor": runtime}, {"run.txt": "x"}, entrypoint="run.txt"
    )
    progress: list[str] = []
    runner.on_progress = progress.append
    result = await runner.run(tool)
    text = await everything_of(runner, conn, result)
    assert result.status == "success", result.error
    assert result.output == "***", "the step wrote the variable's value; the run masks it"
    assert ENV_VALUE not in text + "\n".join(progress)


async def test_a_secret_a_tool_prints_is_masked_in_its_output(
    runner: Runner, conn: psycopg.Connection, publish_tool: Callable[..., str]
) -> None:
    tool = publish_tool(
        "printing",
        {"tool_type": "script", "executor": "bash_runtime", "config": {"env": {"TOKEN": "${KIWI_TEST_SECRET}"}}},
        {"run.sh": 'echo "token=$TOKEN"\n'},
        entrypoint="run.sh",
    )
    result = await runner.run(tool)
    text = await everything_of(runner, conn, result)
    assert result.status == "success", result.error
    assert result.output == "token=***"
    assert SECRET not in text


async def test_a_secret_in_structured_output_is_masked_in_keys_and_values(
    runner: Runner, conn: psycopg.Connection, publish_tool: Callable[..., str]
) -> None:
    tool = publish_tool(
        "printing_json",
        {"tool_type": "script", "executor": "bash_runtime", "config": {"env": {"TOKEN": "${KIWI_TEST_SECRET}"}}},
        {"run.sh": 'printf \'{"t": "%s", "%s": [1, "a %s b"]}\' "$TOKEN" "$TOKEN" "$TOKEN"\n'},
        entrypoint="run.sh",
    )
    result = await runner.run(tool)
    text = await everything_of(runner, conn, result)
    assert result.status == "success", result.error
    assert result.output == {"t": "***", "***": [1, "a *** b"]}
    assert SECRET not in text


async def test_a_secret_printed_before_a_failure_is_masked_everywhere(
    runner: Runner, conn: psycopg.Connection, publish_tool: Callable[..., str]
) -> None:
    tool = publish_tool(
        "printing_fail",
        {"tool_type": "script", "executor": "bash_runtime", "config": {"env": {"TOKEN": "${KIWI_TEST_SECRET}"}}},
        {"run.sh": 'echo "out $TOKEN"; echo "err $TOKEN" >&2; exit 7\n'},
        entrypoint="run.sh",
    )
    result = await runner.run(tool)
    text = await everything_of(runner, conn, result)
    assert result.status == "error" and result.exit_code == 7
    assert result.output == "out ***" and result.error == "err ***"
    assert SECRET not in text


def test_a_secret_is_masked_in_the_forms_a_url_or_json_gives_it() -> None:
    value = 'p@ss w/"quote"é'
    secrets = secret_values(["S"], {"S": value})
    texts = [value, quote(value, safe=""), quote_plus(value, safe=""), json.dumps(value), json.dumps(value)[1:-1]]
    for text in texts:
        assert value not in scrub(f"<{text}>", secrets), text
        assert MASK in scrub(f"<{text}>", secrets)


def test_short_values_are_settings_and_stay_visible() -> None:
    """Masking "1" or "dev" would mask ordinary text and turn echoes into an oracle for the value."""
    assert secret_values(["A", "B", "C"], {"A": "1", "B": "dev", "C": "long-enough"}) == ["long-enough"]
    assert scrub_deep({"dev": ["1", "long-enough"]}, secret_values(["B", "C"], {"B": "dev", "C": "long-enough"})) == {
        "dev": ["1", MASK]
    }


@given(
    st.recursive(
        st.text(alphabet="ab-/", max_size=12),
        lambda inner: (
            st.lists(inner, max_size=3) | st.dictionaries(st.text(alphabet="ab-/", max_size=8), inner, max_size=3)
        ),
        max_leaves=12,
    ),
    st.lists(st.text(alphabet="ab-/", min_size=4, max_size=6), min_size=1, max_size=3),
)
@settings(max_examples=300, deadline=None)
def test_every_string_and_key_is_masked_however_short_the_others(value: object, values: list[str]) -> None:
    """scrub_deep skips the strings shorter than every secret (they cannot hold one); it masks
    exactly what masking every string and key would."""
    secrets = secret_values([f"V{i}" for i in range(len(values))], {f"V{i}": v for i, v in enumerate(values)})

    def every(item: object) -> object:
        if isinstance(item, str):
            return scrub(item, secrets)
        if isinstance(item, list):
            return [every(v) for v in item]
        if isinstance(item, dict):
            return {scrub(k, secrets): every(v) for k, v in item.items()}
        return item

    assert scrub_deep(value, secrets) == every(value)
