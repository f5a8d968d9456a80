"""The subprocess primitive: run a command as a child process, safely and loudly.

Two layers:

* `spawn(ProcessSpec) -> ProcessResult` (process.py, re-exported here) runs one argv, in its
  sandbox, and ends everything it started.
* `SubprocessPrimitive` turns a plan's merged config into a ProcessSpec (argv templates,
  a declared environment, parameters as JSON on stdin, `timeout` in seconds) and the
  result into an Outcome. Besides the parameters and the run's placeholders, argv and env
  templates may use `{param_values...}`: the parameters' values in the order the tool
  declares them (param_values), so a runtime can pass them as positional arguments.

Nothing here knows any runtime or tool: everything specific is config data.
"""

from __future__ import annotations

import json
import re
import signal
from collections.abc import Mapping
from dataclasses import replace
from pathlib import Path
from typing import Any

from ..core.expand import as_text, fill, render_argv, variables_in
from ..core.plan import Plan
from ..errors import ConfigError, Refused
from . import reaper
from .base import Invocation, Outcome
from .process import DEFAULT_MAX_OUTPUT_BYTES, DEFAULT_PATH, DEFAULT_TIMEOUT_S, MAX_TIMEOUT_S, ProcessResult, _resolve
from .process import KILL_GRACE_S as KILL_GRACE_S  # re-exported: spawn's own, for callers of this module
from .process import ProcessSpec as ProcessSpec
from .process import spawn as spawn

_ERROR_LINES, _ERROR_CHARS = 20, 2000  # how much of stderr becomes `error`
_DETAIL_STDERR_CHARS = 16_000  # how much of stderr (its end) goes into `detail`
_PARAM_NAME = re.compile(r"[^A-Z0-9]")
_MAX_ENV_PARAM_BYTES = 32 * 1024  # Linux refuses exec for one env string over 128 KiB
_MAX_POSITIONAL_BYTES = 256 * 1024  # all of {param_values...} together (Linux: 2 MiB for argv and env)


# --------------------------------------------------------------------------- the primitive


class SubprocessPrimitive:
    """Runs plans whose chain ends in the `subprocess` primitive."""

    name = "subprocess"

    def accepts(self, plan: Plan) -> bool:
        return plan.primitive == self.name

    async def run(self, invocation: Invocation) -> Outcome:
        spec = build_spec(invocation)
        site = invocation.site
        if site is not None and site.confined:
            spec = replace(spec, cwd=None, confine=await site.confine(spec.cwd))
        result = await spawn(spec)
        return to_outcome(result, spec, shown_command=_shown_command(invocation.config, spec))

    async def aclose(self) -> None:
        """Nothing to release: every run ends its own process group."""


def build_spec(invocation: Invocation) -> ProcessSpec:
    """The merged config, templated: argv, a declared environment, parameters on stdin.

    `${VAR}`s are resolved in the config text in the same pass as `{placeholders}` are filled
    (expand.fill), so a parameter value that looks like `${SECRET}` stays literal text and
    never reads the runner's environment.
    """
    config, environ = invocation.config, invocation.environ
    tool = invocation.plan.tool_id
    _check_entrypoint_placed(invocation)
    positional, note = param_values(invocation.plan, invocation.params)
    values = {**invocation.values(), "param_values": positional}
    env, env_notes = _environment(invocation, values)
    return ProcessSpec(
        argv=command_argv(config, environ, values, tool_id=tool),
        env=env,
        cwd=_cwd(invocation, values),
        stdin=json.dumps(invocation.params, ensure_ascii=False).encode(),
        timeout_s=seconds(config, "timeout", DEFAULT_TIMEOUT_S, tool),
        max_output_bytes=int(positive_number(config, "max_output_bytes", DEFAULT_MAX_OUTPUT_BYTES, tool)),
        notes=(*((note,) if note else ()), *env_notes),
        on_stderr_line=invocation.listener.line if invocation.listener else None,
    )


def _check_entrypoint_placed(invocation: Invocation) -> None:
    """A command given only options, with an entrypoint the command, args and env never place
    ({entrypoint}, {workdir}, its path), would get just the parameters on stdin, which an
    interpreter given no script (bash, python3) runs as its program: a ConfigError instead."""
    entry, workdir = invocation.placeholders.get("entrypoint"), invocation.placeholders.get("workdir")
    if entry is None or workdir is None:
        return
    config = invocation.config
    command, args, env = config.get("command"), config.get("args"), config.get("env")
    argv = [*(command if isinstance(command, list) else [command]), *(args if isinstance(args, list) else [])]
    if any(not str(a).startswith("-") for a in argv[1:]):  # an operand of its own (a file, a -c program)
        return
    relative = Path(entry).relative_to(workdir).as_posix()
    texts = [*argv, *(env.values() if isinstance(env, Mapping) else [])]
    if not any(isinstance(t, str) and any(m in t for m in ("{entrypoint}", "{workdir}", relative)) for t in texts):
        raise ConfigError(
            f"{invocation.plan.tool_id}: config.args never places its entrypoint {relative!r}, so the command "
            f"{as_text(command)!r} would not run it (and would read the parameters on stdin as its input)",
            hint='the runtime says where the file goes: args: ["{entrypoint}"] (the documents leave it implicit)',
        )


def param_values(plan: Plan, params: Mapping[str, Any]) -> tuple[list[str], str | None]:
    """`{param_values...}`: the parameters' values as argv text (as_text), in the order the tool's
    manifest lists its parameters (a JSON Schema object has no order in the registry: its
    properties by name). An absent parameter before a present one is "" (positions hold); absent
    ones at the end are left out. A value too large for argv ends the list there, with a note
    naming it: every parameter still reaches the tool on stdin."""
    declared = plan.manifest.get("parameters")
    if isinstance(declared, list):
        names = [str(p["name"]) for p in declared if isinstance(p, Mapping) and "name" in p]
    else:
        schema = declared if isinstance(declared, Mapping) else plan.parameters or {}
        properties = schema.get("properties") if isinstance(schema, Mapping) else None
        names = sorted(properties) if isinstance(properties, Mapping) else []
    while names and params.get(names[-1]) is None:
        names.pop()
    out: list[str] = []
    total = 0
    for name in names:
        text = "" if params.get(name) is None else as_text(params[name])
        size = len(text.encode())
        total += size
        if size > _MAX_ENV_PARAM_BYTES or total > _MAX_POSITIONAL_BYTES:
            return out, (
                f"{{param_values...}} stops before parameter {name!r} ({size} bytes): too large for the "
                f"command line; the tool has it, and every parameter, on stdin"
            )
        out.append(text)
    return out, None


def command_argv(
    config: Mapping[str, Any], environ: Mapping[str, str], values: Mapping[str, Any], *, tool_id: str
) -> list[str]:
    """config.command + config.args as one argv: `${VAR}`s first, then `{placeholders}` (one
    argv item each). Long-lived commands (MCP servers) build theirs with this too."""
    command = config.get("command")
    if not command:
        raise ConfigError(
            f"{tool_id}: the subprocess config has no command",
            hint="set config.command (and config.args) in the tool or its runtime",
        )
    args = config.get("args") or []
    if not isinstance(args, list):
        raise ConfigError(f"{tool_id}: config.args must be a list", hint="write args as a YAML list: [a, b]")
    items = [*(command if isinstance(command, list) else [command]), *args]
    return render_argv(items, values, environ)


def resolve_command(command: str, path: str, cwd: Path | None = None) -> str:
    """The executable `command` names, found on `path` (the child's PATH) as spawn finds it;
    PrimitiveError (command not found, permission denied) otherwise."""
    return _resolve(command, path, cwd)


def to_outcome(result: ProcessResult, spec: ProcessSpec, *, shown_command: str | None = None) -> Outcome:
    """Exit 0 is success (stdout parsed as JSON when it is JSON); truncation is never silent:
    it is listed in detail["warnings"], and a cut stdout is also named in `error`."""
    warnings = list(spec.notes)
    cut = f"stdout truncated to its first {spec.max_output_bytes} bytes (max_output_bytes)"
    if result.stdout_truncated:
        warnings.append(cut)
    if result.stderr_truncated:
        warnings.append(f"stderr truncated to its first {spec.max_output_bytes} bytes (max_output_bytes)")
    detail: dict[str, Any] = {
        "command": shown_command if shown_command is not None else spec.argv[0],
        "duration_ms": result.duration_ms,
        "stderr": result.stderr[-_DETAIL_STDERR_CHARS:],
        "stdout_truncated": result.stdout_truncated,
        "stderr_truncated": result.stderr_truncated,
    }
    killed = None
    if result.killed:  # said wherever the run's message goes, and listed in detail
        killed = reaper.describe(result.killed, "" if result.timed_out else " the tool left running")
        detail["killed"] = [{"pid": pid, "name": name} for pid, name in result.killed]
        if not result.timed_out:
            warnings.append(killed)
    if warnings:
        detail["warnings"] = warnings
    if result.limit_message is not None:
        detail["limit"] = result.limit
        tail = _stderr_tail(result.stderr)
        error = result.limit_message + (f"\n{tail}" if tail else "")
        output = _output(result) if result.stdout else None
        return Outcome("error", output=output, error=error, exit_code=result.exit_code, detail=detail)
    if result.timed_out:
        error = f"timed out after {spec.timeout_s:g} s" + (f"; {killed}" if killed else "")
        return Outcome("timeout", output=_output(result) if result.stdout else None, error=error, detail=detail)
    code = result.exit_code
    if code != 0:
        error = _stderr_tail(result.stderr) or _exit_text(code)
        if spec.confine is not None and "No space left on device" in result.stderr:
            mb = spec.confine.profile.limits.file_mb
            error += f"\n(the sandbox's /tmp holds at most its file_mb limit: {mb} MB)"
        error = f"{error}\n{killed}" if killed else error
        output = _output(result) if result.stdout else None
        return Outcome("error", output=output, error=error, exit_code=code, detail=detail)
    notes = "; ".join(w for w in (cut if result.stdout_truncated else None, killed) if w) or None
    return Outcome("success", output=_output(result), error=notes, exit_code=0, detail=detail)


def _output(result: ProcessResult) -> Any:
    text = result.stdout
    if not result.stdout_truncated and text.strip():
        try:
            return json.loads(text)
        except ValueError:
            pass
    return text[:-1] if text.endswith("\n") else text


def _stderr_tail(stderr: str) -> str:
    lines = stderr.rstrip().splitlines()[-_ERROR_LINES:]
    return "\n".join(lines)[-_ERROR_CHARS:]


def _exit_text(code: int | None) -> str:
    if code is not None and code < 0:
        try:
            return f"killed by signal {signal.Signals(-code).name}"
        except ValueError:
            return f"killed by signal {-code}"
    return f"exited with status {code}"


def passthrough(names: list[str], environ: Mapping[str, str]) -> dict[str, str]:
    """The variables named that are set in environ; a trailing `*` matches a prefix (`UV_*`)."""
    out: dict[str, str] = {}
    for name in names:
        if name.endswith("*"):
            out.update({k: v for k, v in environ.items() if k.startswith(name[:-1])})
        elif name in environ:
            out[name] = environ[name]
    return out


def command_environment(
    config: Mapping[str, Any], environ: Mapping[str, str], values: Mapping[str, Any], *, tool_id: str
) -> dict[str, str]:
    """A command's environment from its config alone: the `env_passthrough` variables set in
    `environ`, then `env` (`${VAR}`s from `environ`, `{placeholders}` from `values`; a null
    value unsets), and a default PATH. The runner's own environment never leaks through.
    Long-lived commands (MCP servers) build theirs with this too."""
    env = passthrough(list(config.get("env_passthrough") or []), environ)
    declared = config.get("env") or {}
    if not isinstance(declared, dict):
        raise ConfigError(f"{tool_id}: config.env must be a mapping", hint="write env as NAME: value")
    for key, value in declared.items():
        if value is None:  # a child config can unset what its runtime set
            env.pop(str(key), None)
        else:
            env[str(key)] = fill(as_text(value), values, environ=environ)
    if not env.get("PATH"):
        env["PATH"] = DEFAULT_PATH
    return env


def _environment(invocation: Invocation, values: Mapping[str, Any]) -> tuple[dict[str, str], list[str]]:
    """What the config declares (command_environment), the parameters, and the tool's identity;
    and a note for each parameter too large for one environment string (exec would fail): it
    is left out of KIWI_PARAM_*, named in KIWI_PARAMS_NOT_IN_ENV (so a tool can tell it from an
    absent one) and in the run's warnings; stdin carries it, with every parameter, as JSON."""
    env = command_environment(invocation.config, invocation.environ, values, tool_id=invocation.plan.tool_id)
    left_out: list[str] = []
    notes: list[str] = []
    for name, value in invocation.params.items():
        text = as_text(value)
        variable = "KIWI_PARAM_" + _PARAM_NAME.sub("_", name.upper())
        if len(text) <= _MAX_ENV_PARAM_BYTES // 4 or (size := len(text.encode())) <= _MAX_ENV_PARAM_BYTES:
            env[variable] = text
            continue
        left_out.append(name)
        notes.append(
            f"parameter {name!r} ({size} bytes) is over the {_MAX_ENV_PARAM_BYTES} bytes an environment "
            f"variable holds: {variable} is not set (KIWI_PARAMS_NOT_IN_ENV names it); the tool has it "
            "on stdin, with every parameter, as one JSON object"
        )
    if left_out:
        env["KIWI_PARAMS_NOT_IN_ENV"] = ",".join(left_out)
    env["KIWI_TOOL_ID"] = invocation.plan.tool_id
    if invocation.kernel is not None:  # the kernel socket (runner/harness/kernel.py)
        env["KIWI_KERNEL"] = invocation.kernel
    env["KIWI_TOOL_VERSION"] = invocation.plan.version
    return env, notes


def _cwd(invocation: Invocation, values: Mapping[str, Any]) -> Path | None:
    """config.cwd, relative to the workdir and never outside it (symlinks included)."""
    raw = invocation.config.get("cwd")
    workdir = invocation.workdir
    if raw in (None, ""):
        return workdir
    tool = invocation.plan.tool_id
    if workdir is None:
        raise ConfigError(f"{tool}: config.cwd needs a workdir to be relative to", hint="run the tool with a workdir")
    root = Path(workdir).resolve()
    target = (root / fill(str(raw), values, environ=invocation.environ)).resolve()
    if not target.is_relative_to(root):
        raise Refused(
            f"{tool}: cwd {raw!r} is outside the tool's working directory",
            hint="use a path inside the workdir, without '..' or symlinks leading out",
        )
    return target


def seconds(config: Mapping[str, Any], key: str, default: float, tool: str) -> float:
    """config[key] as a number of seconds above 0 and at most MAX_TIMEOUT_S (a timeout), its default
    when absent; else a ConfigError naming the field."""
    value = config.get(key)
    if value is None:
        return default
    if isinstance(value, bool) or not isinstance(value, int | float) or not (0 < value <= MAX_TIMEOUT_S):
        raise ConfigError(
            f"{tool}: config.{key} must be a number of seconds greater than 0 and at most {MAX_TIMEOUT_S:g}"
            f" (24 hours), not {value!r}"
        )
    return float(value)


def positive_number(config: Mapping[str, Any], key: str, default: float, tool: str) -> float:
    """config[key] as a positive number (timeouts, sizes), its default when absent; else a ConfigError."""
    value = config.get(key)
    if value is None:
        return default
    if isinstance(value, bool) or not isinstance(value, int | float) or value <= 0:
        raise ConfigError(f"{tool}: config.{key} must be a positive number, not {value!r}")
    return float(value)


def _shown_command(config: Mapping[str, Any], spec: ProcessSpec) -> str:
    """argv[0] as run, unless it came from ${VAR}s: environment values stay out of detail."""
    command = config.get("command")
    first = command[0] if isinstance(command, list) and command else command
    return str(first) if variables_in(first) else spec.argv[0]
