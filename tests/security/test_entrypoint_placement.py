"""A tool's parameters never become its interpreter's program (found while running the design
documents' runtimes, issue 15).

The documents write a runtime as `command: bash` (or python3, node) and leave the script
implied. Run as written by the subprocess primitive, the script was never passed: bash got
only the parameters, as JSON on stdin, and read them as its program, so a parameter holding
`$(...)` ran as a command. A command given only options (or none), whose args and env never
place the entrypoint ({entrypoint}, {workdir} or the file's own path), is now refused before
anything runs, naming config.args; runtimes that place it, or give the command an operand of
its own, run as before.

Real parts: the real database, a runtime and a script published into it, real processes.
"""

from __future__ import annotations

from collections.abc import Callable
from pathlib import Path
from typing import Any

import pytest

from runner import Runner

SCRIPT = '#!/bin/bash\nprintf \'{"said": "%s"}\\n\' "$KIWI_PARAM_WORD"\n'
PARAMETERS = [{"name": "word", "type": "string", "required": True}]


def script_on(publish_tool: Callable[..., str], runtime_config: dict[str, Any]) -> str:
    runtime = publish_tool("placement_rt", {"tool_type": "runtime", "executor": "subprocess", "config": runtime_config})
    return publish_tool(
        "placement_tool",
        {"tool_type": "script", "executor": runtime, "parameters": PARAMETERS},
        {"say.sh": SCRIPT},
        entrypoint="say.sh",
    )


@pytest.mark.parametrize(
    "runtime_config",
    [
        {"command": "bash"},  # the documents' spelling
        {"command": "bash", "args": ["-s"]},  # read the program from stdin, explicitly or not
        {"command": "sh", "args": ["-e"], "env": {"MODE": "strict"}},
    ],
)
async def test_a_command_that_never_places_the_entrypoint_is_refused_and_runs_nothing(
    runner: Runner, publish_tool: Callable[..., str], tmp_path: Path, runtime_config: dict[str, Any]
) -> None:
    tool = script_on(publish_tool, runtime_config)
    marker = tmp_path / "pwned"
    result = await runner.run(tool, {"word": f"$(touch {marker})"})
    assert result.status == "error" and result.failure is not None
    assert result.failure.exit_code == 4, "a bad config, refused"
    assert "config.args never places its entrypoint 'say.sh'" in result.failure.message
    assert '["{entrypoint}"]' in (result.failure.hint or "")
    assert not marker.exists(), "the parameter never ran as a command"


@pytest.mark.parametrize(
    "runtime_config",
    [
        {"command": "bash", "args": ["{entrypoint}"]},
        {"command": "bash", "args": ["say.sh"]},  # the file's own path, from the workdir (the cwd)
        {"command": "bash", "args": ["-c", 'exec bash "$0"', "{workdir}/say.sh"]},
        {"command": "bash", "args": ["-c", 'exec bash "$SCRIPT"'], "env": {"SCRIPT": "{entrypoint}"}},
    ],
)
async def test_a_command_that_places_the_entrypoint_runs_it(
    runner: Runner, publish_tool: Callable[..., str], runtime_config: dict[str, Any]
) -> None:
    tool = script_on(publish_tool, runtime_config)
    result = await runner.run(tool, {"word": "$(echo no)"})
    assert result.status == "success", result.error
    assert result.output == {"said": "$(echo no)"}


async def test_a_command_with_an_operand_of_its_own_is_left_alone(
    runner: Runner, publish_tool: Callable[..., str]
) -> None:
    """A runtime may run something other than the tool's file (its environment's, a fixed program)."""
    tool = script_on(publish_tool, {"command": "printf", "args": ['{"said": "%s"}', "operand"]})
    result = await runner.run(tool, {"word": "ignored"})
    assert result.status == "success", result.error
    assert result.output == {"said": "operand"}
