"""Environments a runtime declares (a virtualenv, node_modules), prepared once and cached.

A runtime's config says, as data:

    environment:
      key: [python3, "{requires}"]          # what the environment depends on
      env_passthrough: ["UV_*"]             # added to the tool's own passthrough for the steps
      steps:                                # commands that build it in {env_dir}
        - {command: uv, args: [venv, "{env_dir}"]}
        - {command: uv, args: [pip, install, ..., "{requires...}"], when: requires}
      timeout: 600                          # seconds each step may take

The directory is named by the hash of the rendered key and steps and of the names of the
variables the steps receive, so the same inputs share one environment and any change builds
a new one. In the sandbox the steps see nothing
else of the tool's (not its files: runner/sandbox/site.py), so nothing outside the key can
shape an environment another tenant's tool will run in. `${VAR}`s (in the steps and in
the config entries they use as placeholders) are resolved only when a step runs: the
hash holds them as written, so no secret value goes into a directory name. A file lock
makes two runs preparing the same environment at once build it once; a finished
environment carries a marker, and a half-built one (a crash, a failed step) is removed
and built again.
"""

from __future__ import annotations

import asyncio
import fcntl
import hashlib
import json
import os
import shutil
import time
from collections.abc import Callable, Iterator, Mapping
from pathlib import Path
from typing import Any

from ..core.expand import expand_vars_deep, fill, render_argv, variables_in
from ..errors import ConfigError, PrimitiveError
from ..primitives.process import MAX_TIMEOUT_S
from ..primitives.subprocess import ProcessSpec, passthrough, spawn
from ..sandbox.confine import ENV_DIR, NOBODY, TOOL_DIR
from ..sandbox.site import ToolSite, hand_over

READY = ".kiwi-ready"
SANDBOX_LAYOUT = 2  # bumped when what a sandboxed environment sees changes (2: no tool files)
DEFAULT_STEP_TIMEOUT_S = 600.0


def config_values(config: Mapping[str, Any]) -> dict[str, Any]:
    """The config's own scalar and list entries, usable as {placeholders} in its environment steps."""
    return {k: v for k, v in config.items() if isinstance(v, str | int | float | bool | list)}


class _Expanded(Mapping[str, Any]):
    """Config entries as step placeholders, their ${VAR}s resolved when a step uses one: they come
    from the registry, so they may name variables, but an entry no step uses is never expanded
    (an unset variable there is no error). `env_dir`, a path, is never expanded."""

    def __init__(self, config: Mapping[str, Any], env_dir: str, environ: Mapping[str, str]) -> None:
        self._values = {**config_values(config), "env_dir": env_dir}
        self._environ = environ

    def __getitem__(self, key: str) -> Any:
        value = self._values[key]
        return value if key == "env_dir" else expand_vars_deep(value, self._environ)

    def __iter__(self) -> Iterator[str]:
        return iter(self._values)

    def __len__(self) -> int:
        return len(self._values)


def environment_key(
    config: Mapping[str, Any], *, sandboxed: bool = False, environ: Mapping[str, str] | None = None
) -> str | None:
    """The hash naming the environment this config needs, or None when it needs none. One built
    in the sandbox (where it lives at /kiwi/env and sees only /usr) is not one built on the
    host: `sandboxed` tells them apart. With the plan's `environ`, the names of the variables
    the steps receive are in it too (not their values, which may be secrets: a plan reads one
    runner's environment, so a name it may read has the same value for every plan that may):
    one built with a variable a namespace was granted is never another namespace's."""
    spec = config.get("environment")
    if not spec:
        return None
    values = config_values(config)
    rendered: dict[str, Any] = {
        "key": render_argv(list(spec.get("key") or []), {**values, "env_dir": "{env_dir}"}),
        "steps": [_render_step(step, {**values, "env_dir": "{env_dir}"}) for step in _active_steps(spec, values)],
    }
    if environ is not None:
        rendered["variables"] = _variables_seen(config, environ)
    if sandboxed:
        rendered["sandbox"] = SANDBOX_LAYOUT
    return hashlib.sha256(json.dumps(rendered, sort_keys=True).encode()).hexdigest()


def _step_environ(config: Mapping[str, Any], environ: Mapping[str, str]) -> dict[str, str]:
    """The environment the steps run with: the tool's and the environment's passthrough."""
    spec = config["environment"]
    names = [*(config.get("env_passthrough") or ["PATH", "HOME"]), *(spec.get("env_passthrough") or [])]
    return passthrough(names, environ)


def _variables_seen(config: Mapping[str, Any], environ: Mapping[str, str]) -> list[str]:
    """The names of the runner's variables the steps see: passed through, or named as ${VAR}s."""
    named = variables_in(config["environment"]) | variables_in(config_values(config))
    return sorted(set(_step_environ(config, environ)) | {n for n in named if n in environ})


def _active_steps(spec: Mapping[str, Any], values: Mapping[str, Any]) -> list[Mapping[str, Any]]:
    steps = []
    for step in spec.get("steps") or []:
        when = step.get("when")
        if when is None or values.get(when):
            steps.append(step)
    return steps


def _render_step(
    step: Mapping[str, Any], values: Mapping[str, Any], environ: Mapping[str, str] | None = None
) -> list[str]:
    """A step's argv: its ${VAR}s and placeholders in one pass (environ None: ${VAR}s as written)."""
    if not step.get("command"):
        raise ConfigError("an environment step has no command")
    command = fill(str(step["command"]), values, environ=environ)
    return [command, *render_argv(list(step.get("args") or []), values, environ)]


async def prepare_environment(
    config: Mapping[str, Any],
    root: Path,
    environ: Mapping[str, str],
    on_progress: Callable[[str], None] | None = None,
    *,
    site: ToolSite | None = None,
) -> Path | None:
    """The ready environment directory for this config (built now if needed), or None. With a
    confined `site`, its steps run in the sandbox (the environment writable, nothing else)."""
    key = environment_key(config, sandboxed=site is not None and site.confined, environ=environ)
    if key is None:
        return None
    env_dir = root / "envs" / key
    if (env_dir / READY).exists():
        return env_dir
    env_dir.parent.mkdir(parents=True, exist_ok=True)
    lock_path = env_dir.parent / f"{key}.lock"
    lock = await asyncio.to_thread(_acquire, lock_path)
    try:
        if (env_dir / READY).exists():  # built by another run while we waited
            return env_dir
        await _build(config, env_dir, environ, on_progress, site)
        return env_dir
    finally:
        fcntl.flock(lock, fcntl.LOCK_UN)
        lock.close()


def _acquire(path: Path) -> Any:
    handle = path.open("a")
    fcntl.flock(handle, fcntl.LOCK_EX)
    return handle


def _step_timeout(spec: Mapping[str, Any]) -> float:
    """config.environment.timeout: seconds above 0 and at most MAX_TIMEOUT_S, as the registry holds
    every timeout (a ConfigError naming the field, never a float() traceback or an endless step)."""
    value = spec.get("timeout")
    if value is None:
        return DEFAULT_STEP_TIMEOUT_S
    if isinstance(value, bool) or not isinstance(value, int | float) or not (0 < value <= MAX_TIMEOUT_S):
        raise ConfigError(
            f"config.environment.timeout must be a number of seconds greater than 0 and at most "
            f"{MAX_TIMEOUT_S:g} (24 hours), not {value!r}"
        )
    return float(value)


async def _build(
    config: Mapping[str, Any],
    env_dir: Path,
    environ: Mapping[str, str],
    on_progress: Callable[[str], None] | None,
    site: ToolSite | None,
) -> None:
    spec = config["environment"]
    confined = site is not None and site.confined
    values = _Expanded(config, ENV_DIR if confined else str(env_dir), environ)
    timeout = _step_timeout(spec)
    shutil.rmtree(env_dir, ignore_errors=True)  # a half-built leftover
    env_dir.mkdir(parents=True)
    step_env = _step_environ(config, environ)
    steps = _active_steps(spec, values)
    started = time.monotonic()
    try:
        if confined:
            hand_over(env_dir, NOBODY)  # the steps write it as the sandbox's user
        for n, step in enumerate(steps, 1):
            argv = _render_step(step, values, environ)
            if on_progress:
                on_progress(f"preparing environment {env_dir.name[:12]} ({n}/{len(steps)}): {' '.join(argv[:3])} …")
            confine = await site.confine_steps(env_dir, spec, "environment") if site else None
            result = await spawn(
                ProcessSpec(
                    argv=argv,
                    env=step_env,
                    cwd=None if confine else env_dir,
                    stdin=None,
                    timeout_s=timeout,
                    max_output_bytes=256 * 1024,
                    confine=confine,
                )
            )
            if result.timed_out or result.exit_code != 0 or result.limit:
                why = (
                    result.limit_message
                    or ("timed out" if result.timed_out else None)
                    or f"exited with status {result.exit_code}"
                )
                tail = _tail(result.stderr) or _tail(result.stdout)
                raise PrimitiveError(
                    f"preparing the environment failed: `{' '.join(argv)}` {why}" + (f":\n{tail}" if tail else ""),
                    hint=_step_hint(argv, confined),
                )
        if confined:
            hand_over(env_dir, os.geteuid())  # back to the runner: no sandbox may change it now
        (env_dir / READY).write_text(json.dumps({"built_in_s": round(time.monotonic() - started, 3)}))
    except BaseException:
        shutil.rmtree(env_dir, ignore_errors=True)
        raise
    if on_progress:
        on_progress(f"environment {env_dir.name[:12]} ready in {time.monotonic() - started:.1f} s")


def _step_hint(argv: list[str], confined: bool) -> str:
    """What to check when a step failed; a step naming the tool's files is told they are not there."""
    if confined and any(TOOL_DIR in arg for arg in argv):
        return (
            f"environment steps do not see the tool's files ({TOOL_DIR}): an environment is shared by "
            "every tool whose requires are the same, so it is built from what the requires name "
            "(packages, versions, URLs), never from a file of the tool"
        )
    return "check the tool's requires and the runtime's environment steps"


def _tail(text: str | bytes, lines: int = 12) -> str:
    if isinstance(text, bytes):
        text = text.decode("utf-8", "replace")
    return "\n".join(text.strip().splitlines()[-lines:])
