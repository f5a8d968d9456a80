"""Finding: a parameter over 32 KiB was silently left out of the KIWI_PARAM_* variables (exec
refuses one environment string over 128 KiB): a tool reading $KIWI_PARAM_TEXT answered as if
the parameter were absent, and nothing said so.

The run goes on (stdin carries every parameter as one JSON object, as it always did), and it
is said three ways: KIWI_PARAMS_NOT_IN_ENV names the parameters left out, so a tool can tell
them from absent ones; the run's warnings name the parameter, the limit and stdin; and the
run's record keeps that warning.
"""

from __future__ import annotations

import json
from collections.abc import Callable

import psycopg
import pytest

from runner import Runner

SCRIPT = (
    'printf \'{"env": %s, "left_out": "%s", "stdin": %s}\\n\' '
    '"${#KIWI_PARAM_TEXT}" "$KIWI_PARAMS_NOT_IN_ENV" "$(wc -c)"\n'
)


@pytest.fixture
def tool(publish_tool: Callable[..., str]) -> str:
    return publish_tool(
        "big_param",
        {
            "tool_type": "script",
            "executor": "bash_runtime",
            "parameters": [{"name": "text", "type": "string", "required": True}],
        },
        {"run.sh": SCRIPT},
        entrypoint="run.sh",
    )


async def test_a_parameter_over_32_kib_is_named_in_the_result_the_record_and_the_environment(
    runner: Runner, tool: str, conn: psycopg.Connection
) -> None:
    text = "x" * (40 * 1024)
    result = await runner.run(tool, {"text": text})
    assert result.status == "success", result.error
    assert result.output["env"] == 0 and result.output["left_out"] == "text"
    assert result.output["stdin"] == len(json.dumps({"text": text}))
    said = [w for w in result.warnings if "KIWI_PARAM_TEXT is not set" in w]
    assert said and "parameter 'text'" in said[0] and "stdin" in said[0], result.warnings
    await runner.flush_records()
    (kept,) = conn.execute("select warnings from tool_runs where id = %s", (result.run_id,)).fetchone()
    assert any("KIWI_PARAM_TEXT is not set" in w for w in kept or []), kept


async def test_a_parameter_that_fits_is_in_the_environment_and_nothing_is_said(runner: Runner, tool: str) -> None:
    result = await runner.run(tool, {"text": "x" * 1000})
    assert result.status == "success", result.error
    assert result.output["env"] == 1000 and result.output["left_out"] == ""
    assert not [w for w in result.warnings if "KIWI_PARAM" in w]
