"""A runtime's `validation: {rules: [...]}` and a tool's `config.entrypoint`, as the design
documents write them (issue 15), run by the real runner with real processes.

The plans are built here, as resolve_execution_plan would answer (their content hashes
true), and served by the in-memory registry: what is tested is the runner's reading of
the merged config, whatever publish accepts today.
"""

from __future__ import annotations

import asyncio
import hashlib
from collections.abc import AsyncIterator, Callable
from pathlib import Path
from typing import Any

import pytest
from hypothesis import HealthCheck, event, given, settings
from hypothesis import strategies as st

from runner import ConfigError, KiwiError, MemoryBackend, Refused, Registry, Runner, RunResult
from runner.harness.validation import KINDS
from runner.trust.content_hash import content_hash
from tests.conftest import local_settings

# the tool runs in the sandbox, which sees /usr but not this venv nor pyenv's interpreters
PY = "/usr/bin/python3"
# a runtime on the subprocess primitive, as a publisher would write it (plus its validation)
RUNTIME = {"command": PY, "args": ["{entrypoint}", "{param_values...}"], "env_passthrough": ["PATH"]}
# the design documents' bash_runtime rules (000, Phase C.0), word for word
DOCUMENTS_BASH_RULES = [
    {"type": "shebang_required", "pattern": "^#!"},
    {"type": "pattern_check", "patterns": {"dangerous": ["rm -rf /", ":(){ :|:& };:"]}, "block": True},
]


def sha(text: str) -> str:
    return hashlib.sha256(text.encode()).hexdigest()


def plan_of(
    tool_id: str,
    files: dict[str, str],
    *,
    runtime: dict[str, Any] | None = None,
    config: dict[str, Any] | None = None,
    marked: str | None = None,
    parameters: list[dict[str, Any]] | None = None,
) -> dict[str, Any]:
    """A script's plan on a runtime whose config is `runtime` (RUNTIME by default): the tool's own
    `config` merged over the runtime's (shallowly: enough here), `marked` (or a lone file) flagged
    is_entrypoint."""
    own = {"tool_id": tool_id, "tool_type": "script", "version": "1.0.0", "executor": "rt", "config": config or {}}
    if parameters is not None:
        own["parameters"] = parameters
    if marked is None and len(files) == 1:
        (marked,) = files  # as publish marks a lone file
    rows = [
        {
            "path": path,
            "sha256": sha(text),
            "size_bytes": len(text.encode()),
            "is_entrypoint": path == marked,
            "content_text": text,
        }
        for path, text in sorted(files.items())
    ]
    merged = {**(RUNTIME if runtime is None else runtime), **(config or {})}
    rt_hash = sha(repr(sorted(merged.items())))
    return {
        "tool_id": tool_id,
        "version": "1.0.0",
        "tool_type": "script",
        "content_hash": content_hash(own, [(r["path"], r["sha256"]) for r in rows]),
        "primitive": "subprocess",
        "executor_id": "rt",
        "chain": [
            {"tool_id": tool_id, "tool_type": "script", "version": "1.0.0", "content_hash": "t" + rt_hash[1:]},
            {"tool_id": "rt", "tool_type": "runtime", "version": "1.0.0", "content_hash": rt_hash},
            {"tool_id": "subprocess", "tool_type": "primitive", "version": "1.0.0", "content_hash": "0" * 64},
        ],
        "config": merged,
        "parameters": {"type": "object", "properties": {p["name"]: {} for p in parameters or []}},
        "files": rows,
        "manifest": own,
    }


@pytest.fixture
async def run_plan(tmp_path: Path) -> AsyncIterator[Callable[..., Any]]:
    """Run a plan (made by plan_of) through a Runner over the in-memory registry."""
    runners: list[Runner] = []
    settings = local_settings(
        "postgresql://unused", tmp_path / "cache", project_dir=tmp_path, user_space=tmp_path / "user"
    )

    async def run(plan: dict[str, Any], params: dict[str, Any] | None = None, **kw: Any) -> RunResult:
        runner = Runner(Registry(MemoryBackend([plan])), settings)
        runners.append(runner)
        return await runner.run(plan["tool_id"], params or {}, **kw)

    yield run
    for runner in runners:
        await runner.aclose()


# --- the measured defect --------------------------------------------------------------------


async def test_the_documents_rules_refuse_a_script_without_a_shebang_holding_rm_rf_root(run_plan: Any) -> None:
    """Regression (issue 15): a runtime with the documents' shebang rule and blocking `rm -rf /`
    rule still ran a script with no shebang that contains `rm -rf /`."""
    runtime = {"command": "bash", "args": ["{entrypoint}"], "validation": {"rules": DOCUMENTS_BASH_RULES}}
    bad = plan_of("wipe", {"run.sh": "echo hi\nrm -rf / --no-preserve-root-not-really\n"}, runtime=runtime)
    result = await run_plan(bad)
    assert isinstance(result.failure, Refused), result
    assert "run.sh:1: the entrypoint must start with a shebang line" in result.error
    assert "run.sh:2: dangerous pattern ('rm -rf /')" in result.error
    good = plan_of("fine", {"run.sh": "#!/bin/bash\necho fine\n"}, runtime=runtime)
    assert (await run_plan(good)).output == "fine"


# --- pattern_check -----------------------------------------------------------------------------


async def test_patterns_are_regular_expressions_so_the_documents_patterns_find_what_they_name(
    run_plan: Any,
) -> None:
    """The documents' python_runtime warns on `subprocess.call.*shell=True`: only a regular
    expression finds it (their sample check's `pattern in content` never would). `^` starts a line."""
    code = "import os\nimport subprocess\nsubprocess.call('true', shell=True)\nprint('os.system')\n"
    documents = {"type": "pattern_check", "patterns": {"dangerous": ["os.system", "subprocess.call.*shell=True"]}}
    anchored = {"type": "pattern_check", "patterns": {"imports": ["^import subprocess$"]}, "warn_only": True}
    runtime = {**RUNTIME, "validation": {"rules": [documents, anchored]}}
    result = await run_plan(plan_of("rx", {"main.py": code}, runtime=runtime))
    assert result.status == "success" and result.output == "os.system"
    assert result.warnings == [
        "main.py:4: dangerous pattern ('os.system')",
        "main.py:3: dangerous pattern ('subprocess.call.*shell=True')",
        "main.py:2: imports pattern ('^import subprocess$')",
    ]
    bomb = {"type": "pattern_check", "patterns": {"dangerous": [":(){ :|:& };:"]}, "block": True}
    forks = plan_of("fb", {"r.sh": "#!/bin/sh\n:(){ :|:& };:\n"}, runtime={**RUNTIME, "validation": {"rules": [bomb]}})
    assert "r.sh:2: dangerous pattern (':(){ :|:& };:')" in (await run_plan(forks)).error


async def test_warn_only_warns_block_refuses_and_a_message_is_said(run_plan: Any) -> None:
    rule = {"type": "pattern_check", "patterns": {"secrets": ["BEGIN PRIVATE KEY"]}, "message": "a key in the code"}
    files = {"main.py": "print('ok')\n", "lib/k.txt": "x\n-----BEGIN PRIVATE KEY-----\n"}
    for extra, blocked in (({"warn_only": True}, False), ({}, False), ({"block": True}, True)):
        runtime = {**RUNTIME, "validation": {"rules": [{**rule, **extra}]}}
        result = await run_plan(plan_of(f"w{len(extra)}{blocked}", files, runtime=runtime, marked="main.py"))
        finding = "lib/k.txt:2: a key in the code ('BEGIN PRIVATE KEY')"
        if blocked:
            assert isinstance(result.failure, Refused) and finding in result.error
        else:
            assert result.output == "ok" and result.warnings == [finding]


# --- shebang_required ----------------------------------------------------------------------------


async def test_shebang_required_looks_at_the_entrypoint_only(run_plan: Any) -> None:
    rules = [{"type": "shebang_required", "pattern": "^#!/usr/bin/env python3", "message": "needs env python3"}]
    runtime = {**RUNTIME, "validation": {"rules": rules}}
    files = {"main.py": "#!/usr/bin/env python3\nprint('ok')\n", "helper.py": "x = 1\n"}
    assert (await run_plan(plan_of("sb", files, runtime=runtime, config={"entrypoint": "main.py"}))).output == "ok"
    other = await run_plan(plan_of("sb2", files, runtime=runtime, config={"entrypoint": "helper.py"}))
    assert isinstance(other.failure, Refused)
    assert "helper.py:1: needs env python3 (shebang_required: '^#!/usr/bin/env python3')" in other.error
    warned = {**runtime, "validation": {"rules": [{**rules[0], "warn_only": True}]}}
    soft = await run_plan(plan_of("sb3", {"main.py": "print('ok')\n"}, runtime=warned))
    assert soft.output == "ok" and soft.warnings[0].startswith("main.py:1: needs env python3")


# --- syntax_check ----------------------------------------------------------------------------------


@pytest.mark.slow
async def test_syntax_check_is_a_command_line_split_before_it_is_filled(run_plan: Any, tmp_path: Path) -> None:
    """`command: "python3 -m py_compile {entrypoint}"`, the documents' form: split into words
    first, so an entrypoint with a space and a quote stays one argument; never a shell.
    (`-X pycache_prefix=/tmp`: the tool's directory is read-only in the sandbox, so the
    compiled file goes to the sandbox's private /tmp instead of __pycache__.)"""
    check = {"type": "syntax_check", "command": f"{PY} -X pycache_prefix=/tmp -m py_compile {{entrypoint}}"}
    runtime = {**RUNTIME, "validation": {"rules": [check]}}
    name = "my 'odd' script.py"
    good = await run_plan(plan_of("sc", {name: "print('compiled')\n"}, runtime=runtime))
    assert good.status == "success" and good.output == "compiled"
    bad = await run_plan(plan_of("sc2", {name: f"open({str(tmp_path / 'ran')!r}, 'w')\nif then (\n"}, runtime=runtime))
    assert isinstance(bad.failure, Refused) and "syntax check failed" in bad.error
    assert "SyntaxError" in bad.error and not (tmp_path / "ran").exists()


async def test_a_parameter_in_a_syntax_check_is_one_word_never_parsed(run_plan: Any, tmp_path: Path) -> None:
    echo = 'sh -c \'printf "checked: %s" "$0" >&2; exit 1\' {p}'
    runtime = {**RUNTIME, "validation": {"rules": [{"type": "syntax_check", "command": echo}]}}
    value = f"a b' ; touch {tmp_path}/pwned; echo '"
    result = await run_plan(
        plan_of("pp", {"m.py": "pass\n"}, runtime=runtime, parameters=[{"name": "p"}]), {"p": value}
    )
    assert isinstance(result.failure, Refused)
    assert f"checked: {value}" in result.error
    assert not (tmp_path / "pwned").exists()


async def test_a_syntax_checks_args_follow_its_command_one_word_each(run_plan: Any) -> None:
    """`command` then `args` (publish's form of the earlier `{command, args}`): each arg is one word."""
    check = {"type": "syntax_check", "command": "sh -c", "args": ['printf "%s|" "$0" "$1" >&2; exit 1', "{entrypoint}"]}
    runtime = {**RUNTIME, "validation": {"rules": [check]}}
    result = await run_plan(plan_of("args", {"a b.py": "pass\n"}, runtime=runtime))
    assert isinstance(result.failure, Refused)
    assert "/kiwi/tool/a b.py|" in result.error, "the entrypoint as the sandbox names it, one word"


@pytest.mark.slow
async def test_a_syntax_check_may_be_an_argv_list_and_has_a_timeout(run_plan: Any) -> None:
    slow = {"type": "syntax_check", "command": ["sleep", "5"], "timeout": 0.3, "message": "too slow to check"}
    result = await run_plan(plan_of("slow", {"m.py": "pass\n"}, runtime={**RUNTIME, "validation": {"rules": [slow]}}))
    assert isinstance(result.failure, Refused)
    assert result.error.startswith("syntax check failed for slow (too slow to check): timed out")


# --- malformed rules: an error naming the field --------------------------------------------------


@pytest.mark.parametrize(
    ("validation", "message"),
    [
        ({"rules": "shebang"}, "config.validation.rules must be a list of rules, not 'shebang'"),
        ("strict", "config.validation must be a mapping holding rules: [...], not 'strict'"),
        ({"rules": ["x"]}, "config.validation.rules[0] must be a mapping with a type, not 'x'"),
        (
            {"rules": [{"type": "shebang_required"}, {"type": "lint"}]},
            "config.validation.rules[1].type must be one of pattern_check, shebang_required, syntax_check, not 'lint'",
        ),
        (
            {"rules": [{"type": "pattern_check", "patterns": ["rm -rf /", 3]}]},
            "config.validation.rules[0].patterns must map a name to a list of patterns",
        ),
        (
            {"rules": [{"type": "pattern_check", "patterns": {"d": ["x"]}, "block": True, "warn_only": True}]},
            "config.validation.rules[0] says both block: true and warn_only: true; give one",
        ),
        (
            {"rules": [{"type": "pattern_check", "patterns": {"d": ["eval("]}}]},
            "config.validation.rules[0].patterns.d: 'eval(' is not a regular expression",
        ),
        (
            {"rules": [{"type": "pattern_check", "patterns": {"d": ["x"]}, "block": "yes"}]},
            "config.validation.rules[0].block must be true or false, not 'yes'",
        ),
        (
            {"rules": [{"type": "shebang_required", "pattern": "(["}]},
            "config.validation.rules[0].pattern '([' is not a regular expression",
        ),
        (
            {"rules": [{"type": "syntax_check", "command": "python3 -c 'unclosed"}]},
            "config.validation.rules[0].command cannot be split into words: No closing quotation",
        ),
        (
            {"rules": [{"type": "syntax_check", "command": "true", "timeout": "1m"}]},
            "config.validation.rules[0].timeout must be a number of seconds greater than 0 and at most 86400",
        ),
    ],
)
async def test_a_malformed_rule_is_refused_naming_it(run_plan: Any, validation: Any, message: str) -> None:
    result = await run_plan(plan_of("bad_rules", {"m.py": "pass\n"}, runtime={**RUNTIME, "validation": validation}))
    assert isinstance(result.failure, ConfigError), result
    assert result.error.startswith("bad_rules: ") and message in result.error


# --- config.entrypoint -----------------------------------------------------------------------------


async def test_config_entrypoint_runs_one_file_of_many(run_plan: Any) -> None:
    """Regression (issue 15): config.entrypoint was honoured only for single-file tools."""
    files = {
        "lib/helper.py": "def shout(text):\n    return text.upper()\n",
        "bin/main.py": "import sys\nsys.path.insert(0, __file__.rsplit('/', 2)[0])\n"
        "from lib.helper import shout\nprint(shout(sys.argv[1]))\n",
        "README.md": "# a tool\n",
    }
    plan = plan_of("many", files, config={"entrypoint": "bin/main.py"}, parameters=[{"name": "text"}])
    result = await run_plan(plan, {"text": "hi there"})
    assert result.status == "success", result.error
    assert result.output == "HI THERE"
    assert (await run_plan({**plan, "config": {**plan["config"], "entrypoint": "./bin/main.py"}}, {"text": "x"})).ok


async def test_config_entrypoint_wins_over_the_marked_file(run_plan: Any) -> None:
    files = {"a.py": "print('a')\n", "b.py": "print('b')\n"}
    assert (await run_plan(plan_of("pick", files, config={"entrypoint": "b.py"}, marked="a.py"))).output == "b"
    assert (await run_plan(plan_of("mark", files, marked="a.py"))).output == "a", "without it: the marked file"


@pytest.mark.parametrize(
    ("entrypoint", "message"),
    [
        ("../outside.py", "config.entrypoint '../outside.py' must be a relative path inside the tool"),
        ("/etc/passwd", "config.entrypoint '/etc/passwd' must be a relative path inside the tool"),
        ("lib\\main.py", "config.entrypoint 'lib\\\\main.py' must be a relative path inside the tool"),
        ("missing.py", "config.entrypoint 'missing.py' is not one of the tool's files (a.py, lib/b.py)"),
        (3, "config.entrypoint must be the path of one of the tool's files, not 3"),
        ("", "config.entrypoint must be the path of one of the tool's files, not ''"),
    ],
)
async def test_a_bad_config_entrypoint_is_an_error_naming_the_field(
    run_plan: Any, entrypoint: Any, message: str
) -> None:
    files = {"a.py": "print('a')\n", "lib/b.py": "print('b')\n"}
    result = await run_plan(plan_of("ep", files, config={"entrypoint": entrypoint}, marked="a.py"))
    assert isinstance(result.failure, ConfigError), result
    assert result.failure.message == f"ep: {message}"


# --- whatever JSON the canonical keys hold, the runner answers with a result ----------------------

json_values = st.recursive(
    st.none() | st.booleans() | st.integers() | st.floats(allow_nan=False) | st.text(max_size=8),
    lambda inner: st.lists(inner, max_size=3) | st.dictionaries(st.text(max_size=6), inner, max_size=3),
    max_leaves=8,
)
# syntax checks run what they name: only harmless commands, and malformed command lines
commands = st.sampled_from(["true", "false", "sh -c 'exit 3'", "'unclosed", "", "{nope}", "true {entrypoint}"])
rules = st.one_of(
    json_values,
    st.fixed_dictionaries(
        {"type": st.sampled_from([*KINDS, "lint", None])},
        optional={
            "patterns": st.one_of(json_values, st.dictionaries(st.text(max_size=4), st.lists(st.text(max_size=4)))),
            "pattern": st.one_of(json_values, st.sampled_from(["^#!", "([", "echo"])),
            "command": st.one_of(commands, st.lists(commands, max_size=2), json_values),
            "block": json_values,
            "warn_only": json_values,
            "args": st.one_of(json_values, st.lists(st.sampled_from(["-n", "{entrypoint}", "{a}"]), max_size=2)),
            "message": json_values,
            "timeout": json_values,
        },
    ),
)
configs = st.fixed_dictionaries(
    {},
    optional={
        "timeout": json_values,
        "entrypoint": st.one_of(json_values, st.sampled_from(["run.sh", "./run.sh", "lib/x.txt", "../run.sh"])),
        "validation": st.one_of(json_values, st.fixed_dictionaries({"rules": st.one_of(json_values, st.lists(rules))})),
    },
)


@given(config=configs, params=st.dictionaries(st.sampled_from(["a", "b"]), json_values, max_size=2))
@settings(max_examples=150, deadline=None, suppress_health_check=[HealthCheck.function_scoped_fixture])
def test_any_value_of_the_canonical_keys_gives_a_result_never_a_crash(
    loop: asyncio.AbstractEventLoop, tmp_path: Path, config: dict[str, Any], params: dict[str, Any]
) -> None:
    runtime = {"command": "true", "args": ["{entrypoint}", "{param_values...}"]}
    files = {"run.sh": "#!/bin/sh\necho hi\n", "lib/x.txt": "rm -rf /\n"}
    plan = plan_of(
        "fz", files, runtime=runtime, config=config, marked="run.sh", parameters=[{"name": "a"}, {"name": "b"}]
    )
    plan["parameters"] = {"type": "object"}  # any values: the property under test is the config
    settings_ = local_settings(
        "postgresql://unused", tmp_path / "cache", project_dir=tmp_path, user_space=tmp_path / "user", record_runs=False
    )

    async def go() -> RunResult:
        runner = Runner(Registry(MemoryBackend([plan])), settings_)
        try:
            return await runner.run("fz", params)
        finally:
            await runner.aclose()

    result = loop.run_until_complete(go())
    event(type(result.failure).__name__ if result.failure else result.status)
    assert result.failure is None or isinstance(result.failure, KiwiError), result
    assert result.status in ("success", "error", "timeout")
    if isinstance(result.failure, ConfigError):
        assert "config." in result.failure.message, "a config error names its field"
