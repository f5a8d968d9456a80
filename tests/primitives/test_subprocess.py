"""The subprocess primitive, with real processes: argv safety, the declared environment,
capped output, and process groups that never outlive a run."""

from __future__ import annotations

import asyncio
import contextlib
import json
import os
import sys
import time
from dataclasses import replace
from pathlib import Path
from typing import Any

import pytest
import yaml

from runner import ConfigError, Invocation, Outcome, Plan, PrimitiveError, Refused
from runner.primitives import procfs
from runner.primitives.subprocess import (
    DEFAULT_PATH,
    KILL_GRACE_S,
    ProcessSpec,
    SubprocessPrimitive,
    spawn,
)

ROOT = Path(__file__).resolve().parents[2]
SCRIPTS = Path(__file__).resolve().parent / "scripts"
PY = sys.executable
PRIMITIVE_CONFIG = yaml.safe_load((ROOT / "supabase/seed/subprocess/tool.yaml").read_text())["config"]
ENVIRON = {"PATH": os.environ.get("PATH", DEFAULT_PATH), "HOME": "/home/tool", "LANG": "C.UTF-8"}


def plan(config: dict[str, Any], tool_id: str = "probe") -> Plan:
    """A plan as resolve_execution_plan would give it: the primitive's config under the tool's."""
    return Plan(
        tool_id=tool_id,
        version="1.2.3",
        tool_type="script",
        content_hash="0" * 64,
        primitive="subprocess",
        executor_id="subprocess",
        chain=[],
        config={**PRIMITIVE_CONFIG, **config},
        parameters=None,
    )


async def run(
    config: dict[str, Any],
    params: dict[str, Any] | None = None,
    *,
    workdir: Path | None = None,
    environ: dict[str, str] | None = None,
    placeholders: dict[str, str] | None = None,
) -> Outcome:
    invocation = Invocation(
        plan=plan(config),
        params=params or {},
        workdir=workdir,
        placeholders=placeholders or {},
        environ=ENVIRON if environ is None else environ,
    )
    return await SubprocessPrimitive().run(invocation)


def python(code: str, *args: str, **config: Any) -> dict[str, Any]:
    return {"command": PY, "args": ["-c", code, *args], **config}


def running(pid: int) -> bool:
    """Whether pid is a live process. A zombie is dead: it only waits for a parent to reap it
    (and under an init that never reaps, os.kill(pid, 0) would still find it)."""
    if not os.path.isdir("/proc"):  # no /proc: fall back on the signal test
        try:
            os.kill(pid, 0)
        except ProcessLookupError:
            return False
        return True
    entry = procfs.stat(pid)
    return entry is not None and entry.alive


async def gone(pid: int, within: float = 2.0) -> bool:
    deadline = time.monotonic() + within
    while running(pid):
        if time.monotonic() > deadline:
            return False
        await asyncio.sleep(0.02)
    return True


async def pid_from(path: Path, within: float = 5.0) -> int:
    deadline = time.monotonic() + within
    while not path.exists() or not path.read_text().strip():
        assert time.monotonic() < deadline, f"{path} was never written"
        await asyncio.sleep(0.01)
    return int(path.read_text())


# --------------------------------------------------------------------------- parameters


async def test_parameters_arrive_as_one_json_object_on_stdin_and_as_kiwi_param_variables() -> None:
    params = {"name": "Ada Lovelace", "count": 3, "tags": ["a", "b"], "dry-run": True, "none": None}
    code = (
        "import json, os, sys; "
        "print(json.dumps({'stdin': json.load(sys.stdin), "
        "'env': {k: v for k, v in os.environ.items() if k.startswith('KIWI_')}}))"
    )
    outcome = await run(python(code), params)
    assert outcome.status == "success", outcome
    assert outcome.output["stdin"] == params
    assert outcome.output["env"] == {
        "KIWI_PARAM_NAME": "Ada Lovelace",
        "KIWI_PARAM_COUNT": "3",
        "KIWI_PARAM_TAGS": '["a","b"]',
        "KIWI_PARAM_DRY_RUN": "true",
        "KIWI_PARAM_NONE": "null",
        "KIWI_TOOL_ID": "probe",
        "KIWI_TOOL_VERSION": "1.2.3",
    }


async def test_a_parameter_too_large_for_the_environment_still_arrives_on_stdin() -> None:
    blob = "x" * 1_000_000  # exec refuses any single environment string over 128 KiB
    code = "import json, os, sys; print(len(json.load(sys.stdin)['blob']), 'KIWI_PARAM_BLOB' in os.environ)"
    outcome = await run(python(code), {"blob": blob})
    assert outcome.status == "success", outcome
    assert outcome.output == "1000000 False"


@pytest.mark.parametrize(
    "value",
    ["two words", 'it\'s "quoted"', "; touch pwned", "$(touch pwned)", "`touch pwned`", "* ?", "a\nb", "${HOME}", ""],
)
async def test_a_placeholder_is_one_argv_item_and_no_shell_ever_reads_it(value: str, tmp_path: Path) -> None:
    # bash gets the value as $1 and prints it: it is data, never parsed as a command.
    config = {"command": "bash", "args": ["-c", 'printf "%s" "$1"', "probe", "{text}"]}
    outcome = await run(config, {"text": value}, workdir=tmp_path)
    assert outcome.status == "success", outcome
    assert outcome.output == value
    assert not (tmp_path / "pwned").exists()


async def test_a_list_placeholder_with_dots_spreads_into_several_argv_items() -> None:
    config = python("import json, sys; print(json.dumps(sys.argv[1:]))", "--in", "{files...}", "--end")
    outcome = await run(config, {"files": ["a b.txt", "c;d", "e"]})
    assert outcome.output == ["--in", "a b.txt", "c;d", "e", "--end"]
    assert (await run(config, {"files": []})).output == ["--in", "--end"]


async def test_run_time_placeholders_fill_the_command_args_and_env(tmp_path: Path) -> None:
    script = tmp_path / "main.py"
    script.write_text("import os, sys; print(sys.argv[0], os.environ['WHERE'])\n")
    config = {"command": PY, "args": ["{entrypoint}"], "env": {"WHERE": "{env_dir}/lib"}}
    outcome = await run(config, workdir=tmp_path, placeholders={"entrypoint": str(script), "env_dir": "/envs/abc"})
    assert outcome.output == f"{script} /envs/abc/lib"


ARGV = python("import json, sys; print(json.dumps(sys.argv[1:]))", "{param_values...}")


async def run_declared(parameters: Any, params: dict[str, Any], config: dict[str, Any] = ARGV) -> Outcome:
    """A run of a tool whose manifest declares `parameters` (a list, or a JSON Schema object)."""
    declared = replace(plan(config), manifest={"parameters": parameters})
    invocation = Invocation(plan=declared, params=params, environ=ENVIRON)
    return await SubprocessPrimitive().run(invocation)


@pytest.mark.slow
async def test_param_values_are_the_parameters_in_their_declared_order() -> None:
    """The design documents' Python tools read sys.argv[1] (issue 15): python_runtime passes
    "{param_values...}" after the script."""
    declared = [{"name": n, "type": "string"} for n in ("text", "count", "flags", "unset", "tail")]
    values = {"tail": "t", "count": 3, "text": "a b; $(rm -rf /)", "flags": ["-x", True]}
    outcome = await run_declared(declared, values)
    assert outcome.output == ["a b; $(rm -rf /)", "3", '["-x",true]', "", "t"], "one item each, JSON for non-text"
    assert (await run_declared(declared, {"text": "only"})).output == ["only"], "absent ones at the end are left out"
    assert (await run_declared(declared, {})).output == []
    schema = {"type": "object", "properties": {"zeta": {}, "alpha": {}, "mid": {}}}
    assert (await run_declared(schema, {"zeta": "z", "alpha": "a", "mid": "m"})).output == ["a", "m", "z"]


async def test_a_value_too_large_for_argv_ends_param_values_and_says_so() -> None:
    declared = [{"name": n} for n in ("small", "huge", "after")]
    outcome = await run_declared(declared, {"small": "s", "huge": "x" * 200_000, "after": "a"})
    assert outcome.status == "success" and outcome.output == ["s"], "the run still starts: stdin has every value"
    assert "{param_values...} stops before parameter 'huge' (200000 bytes)" in outcome.detail["warnings"][0]


@pytest.mark.slow
async def test_timeout_is_the_documents_key() -> None:
    """Regression: `timeout: 1` was ignored (only timeout_s was read): a 4 s sleep succeeded."""
    started = time.monotonic()
    outcome = await run(python("import time; time.sleep(4); print('done')", timeout=1))
    assert outcome.status == "timeout" and outcome.error.startswith("timed out after 1 s")
    assert time.monotonic() - started < 1 + KILL_GRACE_S + 1.0


@pytest.mark.parametrize("value", ["x", 0, -1, True, [5], 1e308, 86401])
async def test_a_timeout_that_is_not_seconds_is_an_error_naming_the_field(value: Any) -> None:
    with pytest.raises(ConfigError) as info:
        await run(python("pass", timeout=value))
    assert str(info.value) == (
        f"probe: config.timeout must be a number of seconds greater than 0 and at most 86400 (24 hours), not {value!r}"
    )


# --------------------------------------------------------------------------- results


async def test_stdout_that_parses_as_json_is_the_structured_output() -> None:
    outcome = await run(python('print(\'{"size": "1.2 MB", "ok": true}\')'))
    assert outcome.status == "success"
    assert outcome.output == {"size": "1.2 MB", "ok": True}
    assert outcome.exit_code == 0
    assert outcome.error is None
    assert outcome.detail["command"] == PY
    assert outcome.detail["duration_ms"] > 0


async def test_other_stdout_is_text_without_its_final_newline() -> None:
    assert (await run(python("print('Hello, world!')"))).output == "Hello, world!"
    assert (await run(python("print('two\\nlines\\n')"))).output == "two\nlines\n"
    assert (await run(python("pass"))).output == ""


async def test_a_non_zero_exit_is_an_error_carrying_the_end_of_stderr() -> None:
    code = "import sys; print('partial'); sys.stderr.write('warming up\\nboom: bad input\\n'); sys.exit(3)"
    outcome = await run(python(code))
    assert outcome.status == "error"
    assert outcome.exit_code == 3
    assert outcome.error.endswith("boom: bad input")
    assert "warming up" in outcome.detail["stderr"]
    assert outcome.output == "partial"


async def test_a_silent_failure_says_its_exit_status_or_the_signal_that_ended_it() -> None:
    outcome = await run(python("raise SystemExit(4)"))
    assert (outcome.status, outcome.exit_code, outcome.error) == ("error", 4, "exited with status 4")
    outcome = await run(python("import os, signal; os.kill(os.getpid(), signal.SIGKILL)"))
    assert (outcome.status, outcome.exit_code, outcome.error) == ("error", -9, "killed by signal SIGKILL")


# --------------------------------------------------------------------------- process groups


@pytest.mark.slow
async def test_a_timeout_kills_the_whole_group_including_a_background_grandchild(tmp_path: Path) -> None:
    config = {
        "command": "bash",
        "args": ["-c", "sleep 300 & echo $! > child.pid; echo $$ > shell.pid; sleep 300"],
        "timeout": 0.5,
    }
    started = time.monotonic()
    outcome = await run(config, workdir=tmp_path)
    assert time.monotonic() - started < 0.5 + KILL_GRACE_S + 1.0
    assert outcome.status == "timeout"
    child, shell = (int((tmp_path / name).read_text()) for name in ("child.pid", "shell.pid"))
    # bash runs its last command in its own process: two sleeps, each named with its pid
    assert (
        outcome.error
        == f"timed out after 0.5 s; killed 2 processes: {min(child, shell)} sleep, {max(child, shell)} sleep"
    )
    assert outcome.detail["killed"] == [{"pid": p, "name": "sleep"} for p in sorted((child, shell))]
    assert outcome.exit_code is None
    for pid in (child, shell):
        assert await gone(pid), f"{pid} survived the timeout"


@pytest.mark.slow
async def test_a_timeout_kills_a_double_forked_grandchild_holding_stdout(tmp_path: Path) -> None:
    pidfile = tmp_path / "grandchild.pid"
    outcome = await run({"command": PY, "args": [str(SCRIPTS / "forker.py"), str(pidfile), "wait"], "timeout": 1})
    assert outcome.status == "timeout"
    assert outcome.output == "started"  # what it printed before the timeout is kept
    assert await gone(await pid_from(pidfile))


async def test_after_a_normal_exit_leftover_background_processes_are_killed_at_once(tmp_path: Path) -> None:
    # Without ending the group, the run would wait 300 s for the grandchild's stdout to close.
    pidfile = tmp_path / "grandchild.pid"
    started = time.monotonic()
    outcome = await run({"command": PY, "args": [str(SCRIPTS / "forker.py"), str(pidfile), "exit"]})
    assert time.monotonic() - started < KILL_GRACE_S + 2.0
    assert (outcome.status, outcome.output) == ("success", "started")
    assert await gone(await pid_from(pidfile))

    outcome = await run({"command": "bash", "args": ["-c", "sleep 300 & echo $!"]})
    assert outcome.status == "success"
    assert await gone(int(outcome.output))


async def test_a_process_that_left_the_group_is_killed_too_and_named(tmp_path: Path) -> None:
    # setsid() takes it out of reach of killpg; the runner, its subreaper, still finds it,
    # and the run ends promptly instead of waiting for its stdout to close.
    pidfile = tmp_path / "escaped.pid"
    started = time.monotonic()
    outcome = await run({"command": PY, "args": [str(SCRIPTS / "forker.py"), str(pidfile), "escape"]})
    escaped = await pid_from(pidfile)
    try:
        assert time.monotonic() - started < 3.0
        assert (outcome.status, outcome.output) == ("success", "started")
        assert outcome.error == f"killed 1 process the tool left running: {escaped} {Path(PY).name[:15]}"
        assert await gone(escaped)
    finally:
        with contextlib.suppress(ProcessLookupError):
            os.kill(escaped, 9)


async def test_cancelling_the_run_kills_the_whole_group(tmp_path: Path) -> None:
    config = {"command": "bash", "args": ["-c", "sleep 300 & echo $! > child.pid; echo $$ > shell.pid; wait"]}
    task = asyncio.create_task(run(config, workdir=tmp_path))
    child, shell = await pid_from(tmp_path / "child.pid"), await pid_from(tmp_path / "shell.pid")
    task.cancel()
    with pytest.raises(asyncio.CancelledError):
        await task
    assert await gone(child)
    assert await gone(shell)


@pytest.mark.slow
@pytest.mark.parametrize("ticks", range(6))
async def test_cancelling_while_the_process_starts_still_kills_its_group(ticks: int, tmp_path: Path) -> None:
    # Regression: asyncio, cancelled while connecting the pipes, killed only the direct child
    # and then waited for pipes the background grandchild held (300 s).
    config = {"command": "bash", "args": ["-c", "sleep 300 & echo $! > child.pid; wait"]}
    task = asyncio.create_task(run(config, workdir=tmp_path))
    for _ in range(ticks):
        await asyncio.sleep(0)
    task.cancel()
    with pytest.raises(asyncio.CancelledError):
        await asyncio.wait_for(task, 5)
    await asyncio.sleep(0.2)  # a shell killed before it wrote the pid never will
    pidfile = tmp_path / "child.pid"
    if pidfile.exists() and pidfile.read_text().strip():
        assert await gone(int(pidfile.read_text()))


# --------------------------------------------------------------------------- output limits


async def test_huge_stdout_is_capped_flagged_and_fast() -> None:
    code = "import sys\nfor _ in range(50): sys.stdout.buffer.write(b'x' * 1_000_000)"
    started = time.monotonic()
    outcome = await run(python(code, max_output_bytes=1 << 20))
    assert time.monotonic() - started < 10
    assert outcome.status == "success"
    assert outcome.output == "x" * (1 << 20)
    assert outcome.detail["stdout_truncated"] is True
    assert outcome.detail["warnings"] == ["stdout truncated to its first 1048576 bytes (max_output_bytes)"]
    assert outcome.error == outcome.detail["warnings"][0]  # loud even where only `error` is shown


async def test_huge_stderr_is_capped_and_flagged_without_failing_the_run() -> None:
    code = "import sys\nfor _ in range(50): sys.stderr.buffer.write(b'e' * 1_000_000)\nprint('done')"
    outcome = await run(python(code, max_output_bytes=1 << 20))
    assert (outcome.status, outcome.output, outcome.error) == ("success", "done", None)
    assert outcome.detail["stderr_truncated"] is True
    assert outcome.detail["stdout_truncated"] is False
    assert outcome.detail["warnings"] == ["stderr truncated to its first 1048576 bytes (max_output_bytes)"]
    assert 0 < len(outcome.detail["stderr"]) <= 16_000


async def test_stdout_and_stderr_are_read_together_so_a_chatty_child_never_deadlocks() -> None:
    spec = ProcessSpec([PY, str(SCRIPTS / "interleave.py"), "20"], ENVIRON, max_output_bytes=64 << 20)
    result = await asyncio.wait_for(spawn(spec), 30)
    assert (result.exit_code, len(result.stdout), len(result.stderr)) == (0, 20 << 20, 20 << 20)
    assert not result.stdout_truncated and not result.stderr_truncated


async def test_large_stdin_is_written_while_output_is_read() -> None:
    data = b"y" * (20 << 20)
    result = await spawn(ProcessSpec(["cat"], ENVIRON, stdin=data, max_output_bytes=1 << 20, timeout_s=30))
    assert (result.exit_code, result.stdout, result.stdout_truncated) == (0, "y" * (1 << 20), True)
    result = await spawn(ProcessSpec(["wc", "-c"], ENVIRON, stdin=data, timeout_s=30))
    assert result.stdout.strip() == str(20 << 20)


@pytest.mark.slow
async def test_a_child_that_never_reads_stdin_is_fine() -> None:
    result = await spawn(ProcessSpec(["true"], ENVIRON, stdin=b"z" * (5 << 20), timeout_s=10))
    assert (result.exit_code, result.timed_out) == (0, False)
    result = await spawn(ProcessSpec(["sleep", "300"], ENVIRON, stdin=b"z" * (5 << 20), timeout_s=0.3))
    assert result.timed_out


async def test_output_that_is_not_utf8_is_decoded_with_replacement_characters() -> None:
    result = await spawn(ProcessSpec([PY, "-c", "import sys; sys.stdout.buffer.write(b'ok \\xff')"], ENVIRON))
    assert result.stdout == "ok \ufffd"


# --------------------------------------------------------------------------- cannot start


async def test_a_missing_interpreter_is_command_not_found(tmp_path: Path) -> None:
    with pytest.raises(PrimitiveError, match="command not found: kiwi-no-such-interpreter") as err:
        await run({"command": "kiwi-no-such-interpreter", "args": ["{entrypoint}"]}, placeholders={"entrypoint": "x"})
    assert err.value.hint

    script = tmp_path / "tool.sh"
    script.write_text("#!/kiwi/no/such/interpreter\necho hi\n")
    script.chmod(0o755)
    with pytest.raises(PrimitiveError, match="command not found") as err:
        await run({"command": str(script)})
    assert "#!" in err.value.hint


async def test_the_command_is_looked_up_on_the_tools_path_not_the_runners(tmp_path: Path) -> None:
    (tmp_path / "kiwi-probe-tool").write_text("#!/bin/sh\necho found\n")
    (tmp_path / "kiwi-probe-tool").chmod(0o755)
    environ = {**ENVIRON, "PATH": f"{tmp_path}:{ENVIRON['PATH']}"}
    assert (await run({"command": "kiwi-probe-tool"}, environ=environ)).output == "found"
    with pytest.raises(PrimitiveError, match="command not found"):
        await run({"command": "kiwi-probe-tool"})


async def test_a_file_that_is_not_executable_is_permission_denied(tmp_path: Path) -> None:
    (tmp_path / "tool.sh").write_text("#!/bin/sh\necho hi\n")
    with pytest.raises(PrimitiveError, match=r"permission denied: \./tool\.sh") as err:
        await run({"command": "./tool.sh"}, workdir=tmp_path)
    assert "make it executable" in err.value.hint
    environ = {**ENVIRON, "PATH": str(tmp_path)}
    with pytest.raises(PrimitiveError, match=r"permission denied: tool\.sh"):
        await run({"command": "tool.sh"}, environ=environ)


async def test_a_missing_working_directory_is_a_clear_error(tmp_path: Path) -> None:
    with pytest.raises(PrimitiveError, match="working directory does not exist"):
        await spawn(ProcessSpec(["true"], ENVIRON, cwd=tmp_path / "missing"))
    with pytest.raises(PrimitiveError, match="working directory does not exist"):
        await run({"command": "true", "cwd": "missing"}, workdir=tmp_path)


async def test_a_config_without_a_command_is_a_config_error() -> None:
    with pytest.raises(ConfigError, match="no command"):
        await run({})


# --------------------------------------------------------------------------- environment


async def test_only_the_declared_environment_reaches_the_tool(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("KIWI_TEST_SECRET", "hunter2")
    monkeypatch.setenv("API_TOKEN", "tok-123")
    monkeypatch.setenv("HOME", "/home/runner")
    config = {"command": "env", "env": {"TOKEN": "${API_TOKEN}", "MODE": "${KIWI_MODE:-fast}"}}
    outcome = await run(config, environ=os.environ)
    assert outcome.status == "success", outcome
    env = dict(line.split("=", 1) for line in outcome.output.splitlines())
    assert "KIWI_TEST_SECRET" not in env
    assert "hunter2" not in outcome.output
    assert (env["HOME"], env["TOKEN"], env["MODE"]) == ("/home/runner", "tok-123", "fast")
    passthrough = {name for name in PRIMITIVE_CONFIG["env_passthrough"] if name in os.environ}
    assert set(env) == passthrough | {"TOKEN", "MODE", "KIWI_TOOL_ID", "KIWI_TOOL_VERSION"}


async def test_without_a_path_the_tool_gets_a_safe_default() -> None:
    outcome = await run({"command": "/usr/bin/env", "env_passthrough": []}, {"n": 1})
    env = dict(line.split("=", 1) for line in outcome.output.splitlines())
    assert env == {"PATH": DEFAULT_PATH, "KIWI_PARAM_N": "1", "KIWI_TOOL_ID": "probe", "KIWI_TOOL_VERSION": "1.2.3"}


async def test_a_parameter_cannot_read_the_runners_environment_through_var_syntax() -> None:
    environ = {**ENVIRON, "API_TOKEN": "tok-123"}
    config = {"command": "printf", "args": ["%s|%s", "{text}", "${API_TOKEN:+set}"], "env": {"X": "{text}"}}
    outcome = await run(config, {"text": "${API_TOKEN}"}, environ=environ)
    assert outcome.output == "${API_TOKEN}|set"


async def test_environment_values_never_appear_in_error_or_detail() -> None:
    environ = {**ENVIRON, "API_TOKEN": "tok-123"}
    config = python("import sys; sys.stderr.write('failed\\n'); sys.exit(1)", env={"TOKEN": "${API_TOKEN}"})
    outcome = await run(config, environ=environ)
    assert outcome.status == "error"
    assert "tok-123" not in json.dumps([outcome.error, outcome.detail])
    with pytest.raises(ConfigError, match="API_TOKEN is not set"):
        await run(config, environ=ENVIRON)


# --------------------------------------------------------------------------- working directory


async def test_cwd_defaults_to_the_workdir_and_may_be_a_folder_inside_it(tmp_path: Path) -> None:
    (tmp_path / "sub").mkdir()
    assert (await run({"command": "pwd"}, workdir=tmp_path)).output == str(tmp_path.resolve())
    assert (await run({"command": "pwd", "cwd": "sub"}, workdir=tmp_path)).output == str((tmp_path / "sub").resolve())


@pytest.mark.parametrize("cwd", ["..", "sub/../../..", "/etc", "link-out"])
async def test_a_cwd_outside_the_workdir_is_refused(cwd: str, tmp_path: Path) -> None:
    workdir = tmp_path / "work"
    (workdir / "sub").mkdir(parents=True)
    (workdir / "link-out").symlink_to(tmp_path)
    with pytest.raises(Refused, match="outside the tool's working directory"):
        await run({"command": "pwd", "cwd": cwd}, workdir=workdir)


# --------------------------------------------------------------------------- the primitive


async def test_the_primitive_accepts_only_subprocess_plans() -> None:
    primitive = SubprocessPrimitive()
    assert primitive.name == "subprocess"
    assert primitive.accepts(plan({"command": "true"}))
    other = plan({})
    assert not primitive.accepts(Plan(**{**other.__dict__, "primitive": "http_client"}))
    await primitive.aclose()


@pytest.mark.slow
async def test_twenty_concurrent_runs_all_succeed() -> None:
    config = python("import json, sys; p = json.load(sys.stdin); print(json.dumps({'i': p['i'] * 2}))")
    outcomes = await asyncio.gather(*(run(config, {"i": i}) for i in range(20)))
    assert [o.status for o in outcomes] == ["success"] * 20
    assert [o.output for o in outcomes] == [{"i": i * 2} for i in range(20)]


def test_passthrough_names_and_prefixes() -> None:
    from runner.primitives.subprocess import passthrough

    environ = {"UV_INDEX_URL": "u", "UV_CACHE_DIR": "c", "UVX": "no", "PATH": "/bin", "SECRET": "s"}
    assert passthrough(["PATH", "UV_*", "MISSING"], environ) == {
        "PATH": "/bin",
        "UV_INDEX_URL": "u",
        "UV_CACHE_DIR": "c",
    }


@pytest.mark.slow
async def test_runs_leave_no_descriptor_open_and_no_child_unreaped() -> None:
    """Each run's pipes and its exit's pidfd are closed, and its child reaped, however it ended:
    normally, after writing more stdin than a pipe holds to a child that never read it, or by
    its timeout (the run's descriptors are the runner's own, not asyncio's transports')."""

    def open_fds() -> int:
        return len(os.listdir("/proc/self/fd"))

    def zombies() -> list[int]:
        return [p.pid for p in procfs.processes() if p.ppid == os.getpid() and p.state == "Z"]

    await spawn(ProcessSpec(["true"], ENVIRON))  # whatever the first run sets up once
    before = open_fds()
    earlier = set(zombies())  # what tests before this one left to this process (it may be their subreaper)
    for _ in range(5):
        assert (await spawn(ProcessSpec(["echo", "hi"], ENVIRON, stdin=b"{}"))).exit_code == 0
        assert (await spawn(ProcessSpec(["true"], ENVIRON, stdin=b"z" * (1 << 20)))).exit_code == 0
        assert (await spawn(ProcessSpec(["sleep", "30"], ENVIRON, stdin=b"z" * (1 << 20), timeout_s=0.2))).timed_out
    await asyncio.sleep(0.2)  # a killed child's exit is seen on a later turn of the loop
    assert open_fds() == before
    assert set(zombies()) - earlier == set()
