"""Checks a runtime declares, run before a tool does, with no per-runtime code.

    validation:
      rules:
        - {type: syntax_check, command: "python3 -X pycache_prefix=/tmp -m py_compile {entrypoint}"}
        - {type: pattern_check, patterns: {dangerous: ["os.system", "eval\\("]}, warn_only: true}
        - {type: pattern_check, patterns: {dangerous: ["rm -rf /"]}, block: true, message: ...}
        - {type: shebang_required, pattern: "^#!"}

Only `validation.rules` is read; each rule is one of:

* `pattern_check`: `patterns` maps a name (`dangerous`) to a list of patterns, each a
  regular expression as Python writes it (multiline: `^` starts a line) searched in every
  text file of the tool, in linear time (core/linear_regex.py: no lookaround and no
  backreferences, the features that need a backtracking engine; a pattern using them is a
  ConfigError). The documents write them as strings and their sample check compares them
  literally (`pattern in content`), yet one of their own patterns is
  `subprocess.call.*shell=True`, which only means something as a regular expression; read
  as one, every pattern the documents show finds what it names (`rm -rf /`, `os.system`,
  the fork bomb). `block: true` refuses the run; otherwise (`warn_only: true`, the
  default) it goes with a warning. Each finding names file and line.
* `shebang_required`: the entrypoint's text must match `pattern` (a regular expression
  searched from the start of the file; `^#!` when absent), else the run is refused
  (`warn_only: true`: a warning).
* `syntax_check`: `command`, a command line split into words as a shell would (shlex) but
  never run by one (or an argv list), then `args`, if any, one word each; each word is
  then filled on its own (`{entrypoint}`, `{env_dir}`, `{param}`, `${VAR}`), so nothing
  filled in is split or parsed again. It runs in the tool's directory for at most
  `timeout` seconds (60); failing refuses the run. In the sandbox that directory is
  read-only: a check that writes (py_compile's __pycache__) must write under /tmp.
  A success is remembered per content and argv (also under the cache, for the next process).

Any rule may carry a `message`, said with each finding. A malformed rule is a ConfigError
naming it (`config.validation.rules[1].type`).
"""

from __future__ import annotations

import functools
import hashlib
import json
import shlex
from collections.abc import Mapping
from pathlib import Path
from typing import Any

from ..core.expand import render_argv
from ..core.linear_regex import linear_pattern
from ..core.materialize import entrypoint_file
from ..core.plan import Plan
from ..errors import ConfigError, Refused
from ..primitives.process import MAX_TIMEOUT_S
from ..primitives.subprocess import ProcessSpec, passthrough, spawn
from ..sandbox.site import ToolSite

KINDS = ("pattern_check", "shebang_required", "syntax_check")
DEFAULT_SHEBANG = "^#!"
DEFAULT_CHECK_TIMEOUT_S = 60.0

# Static findings per chain: the rules come from the chain's configs and the text from the
# tool's files, and every element's content_hash pins both.
_findings: dict[tuple[str, ...], tuple[list[str], list[str]]] = {}
# Syntax checks passed in this process, by content hash and command line (also marked on disk,
# under a digest of both, for the next process).
_checked: set[tuple[str, ...]] = set()


def rules_of(plan: Plan) -> list[tuple[str, Mapping[str, Any]]]:
    """(where, rule) for each of config.validation.rules, its type checked."""
    spec = plan.config.get("validation")
    if spec is None:
        return []
    tool = plan.tool_id
    if not isinstance(spec, Mapping):
        raise ConfigError(f"{tool}: config.validation must be a mapping holding rules: [...], not {spec!r}")
    rules = spec.get("rules") or []
    if not isinstance(rules, list):
        raise ConfigError(f"{tool}: config.validation.rules must be a list of rules, not {rules!r}")
    out = []
    for i, rule in enumerate(rules):
        where = f"config.validation.rules[{i}]"
        if not isinstance(rule, Mapping):
            raise ConfigError(f"{tool}: {where} must be a mapping with a type, not {rule!r}")
        if rule.get("type") not in KINDS:
            raise ConfigError(
                f"{tool}: {where}.type must be one of {', '.join(KINDS)}, not {rule.get('type')!r}",
            )
        message = rule.get("message")
        if message is not None and not isinstance(message, str):
            raise ConfigError(f"{tool}: {where}.message must be text, not {message!r}")
        out.append((where, rule))
    return out


def static_findings(plan: Plan, rules: list[tuple[str, Mapping[str, Any]]]) -> tuple[list[str], list[str]]:
    """(blocking, warnings) of the pattern_check and shebang_required rules, each naming file and line."""
    key = (plan.content_hash, *(link.content_hash for link in plan.chain))
    if key not in _findings:
        if len(_findings) >= 4096:
            _findings.clear()
        _findings[key] = _scan(plan, rules)
    blocking, warnings = _findings[key]
    return list(blocking), list(warnings)


def _scan(plan: Plan, rules: list[tuple[str, Mapping[str, Any]]]) -> tuple[list[str], list[str]]:
    blocking: list[str] = []
    warnings: list[str] = []
    for where, rule in rules:
        if rule["type"] == "pattern_check":
            found = _pattern_check(plan, where, rule)
            blocks = _blocks(plan, where, rule, default=False)
        elif rule["type"] == "shebang_required":
            found = _shebang_required(plan, where, rule)
            blocks = _blocks(plan, where, rule, default=True)
        else:
            continue
        (blocking if blocks else warnings).extend(found)
    return blocking, warnings


def _blocks(plan: Plan, where: str, rule: Mapping[str, Any], *, default: bool) -> bool:
    """Whether the rule's findings refuse the run: `block: true`, or `warn_only: true` for a warning."""
    block, warn_only = rule.get("block"), rule.get("warn_only")
    for name, value in (("block", block), ("warn_only", warn_only)):
        if value is not None and not isinstance(value, bool):
            raise ConfigError(f"{plan.tool_id}: {where}.{name} must be true or false, not {value!r}")
    if block is not None and warn_only is not None and block == warn_only:
        said = f"block: {str(block).lower()} and warn_only: {str(warn_only).lower()}"
        raise ConfigError(f"{plan.tool_id}: {where} says both {said}; give one")
    if block is not None:
        return block
    return default if warn_only is None else not warn_only


def _pattern_check(plan: Plan, where: str, rule: Mapping[str, Any]) -> list[str]:
    tool = plan.tool_id
    groups = rule.get("patterns")
    if not isinstance(groups, Mapping) or not all(
        isinstance(ps, list) and all(isinstance(p, str) and p for p in ps) for ps in groups.values()
    ):
        raise ConfigError(
            f"{tool}: {where}.patterns must map a name to a list of patterns, not {groups!r}",
            hint='for example patterns: {dangerous: ["rm -rf /"]}',
        )
    found = []
    for name, patterns in groups.items():
        for pattern in patterns:
            try:
                compiled = linear_pattern(pattern, multiline=True, python=True)
            except ValueError as e:
                raise ConfigError(
                    f"{tool}: {where}.patterns.{name}: {e}",
                    hint="escape what is meant literally (\\( for a '(')",
                ) from None
            for f in plan.files:
                line = compiled.first_line(f.content_text) if f.content_text is not None else None
                if line is not None:
                    said = rule.get("message") or f"{name} pattern"
                    found.append(f"{f.path}:{line}: {said} ({pattern!r})")
    return found


def _shebang_required(plan: Plan, where: str, rule: Mapping[str, Any]) -> list[str]:
    tool = plan.tool_id
    pattern = rule.get("pattern", DEFAULT_SHEBANG)
    try:
        compiled = linear_pattern(pattern, python=True) if isinstance(pattern, str) else None
    except ValueError as e:
        raise ConfigError(f"{tool}: {where}.pattern {e}") from None
    if compiled is None:
        raise ConfigError(f"{tool}: {where}.pattern must be a regular expression (text), not {pattern!r}")
    entry = entrypoint_file(plan)
    if entry is None:
        raise ConfigError(f"{tool}: {where} (shebang_required) needs an entrypoint, and the tool has none")
    if entry.content_text is not None and compiled.search(entry.content_text):
        return []
    said = rule.get("message") or "the entrypoint must start with a shebang line (#!/usr/bin/env ...)"
    return [f"{entry.path}:1: {said} (shebang_required: {pattern!r})"]


async def validate(
    plan: Plan,
    workdir: Path | None,
    values: Mapping[str, Any],
    environ: Mapping[str, str],
    cache_root: Path,
    *,
    site: ToolSite | None = None,
) -> list[str]:
    """Run the declared rules; return warnings, raise Refused when one blocks."""
    rules = rules_of(plan)
    if not rules:
        return []
    blocking, warnings = static_findings(plan, rules)
    if blocking:
        raise Refused(
            "validation blocked the run:\n" + "\n".join(f"  - {b}" for b in blocking),
            hint="the runtime's validation rules refuse this content",
        )
    if workdir is not None:
        for where, rule in rules:
            if rule["type"] == "syntax_check":
                await _syntax_check(plan, where, rule, workdir, values, environ, cache_root, site)
    return warnings


def _check_argv(
    plan: Plan, where: str, rule: Mapping[str, Any], values: Mapping[str, Any], environ: Mapping[str, str]
) -> list[str]:
    """The check's words (the command line split, then `args`), each filled on its own."""
    command = rule.get("command")
    if isinstance(command, str):
        try:
            words: list[Any] = list(_split(command))
        except ValueError as e:
            raise ConfigError(f"{plan.tool_id}: {where}.command cannot be split into words: {e}") from None
    elif isinstance(command, list) and all(isinstance(w, str) for w in command):
        words = list(command)
    else:
        raise ConfigError(f"{plan.tool_id}: {where}.command must be a command line (text) or a list, not {command!r}")
    if not words:
        raise ConfigError(f"{plan.tool_id}: {where}.command is empty")
    args = rule.get("args") or []
    if not isinstance(args, list):
        raise ConfigError(f"{plan.tool_id}: {where}.args must be a list of arguments, not {args!r}")
    return render_argv([*words, *args], values, environ)


@functools.lru_cache(maxsize=256)
def _split(command: str) -> tuple[str, ...]:
    """A check's command line split into words (shlex), once per command line."""
    return tuple(shlex.split(command))


def _timeout(plan: Plan, where: str, rule: Mapping[str, Any]) -> float:
    value = rule.get("timeout", DEFAULT_CHECK_TIMEOUT_S)
    if isinstance(value, bool) or not isinstance(value, int | float) or not (0 < value <= MAX_TIMEOUT_S):
        raise ConfigError(
            f"{plan.tool_id}: {where}.timeout must be a number of seconds greater than 0 and at most "
            f"{MAX_TIMEOUT_S:g} (24 hours), not {value!r}"
        )
    return float(value)


async def _syntax_check(
    plan: Plan,
    where: str,
    rule: Mapping[str, Any],
    workdir: Path,
    values: Mapping[str, Any],
    environ: Mapping[str, str],
    cache_root: Path,
    site: ToolSite | None = None,
) -> None:
    # One pass: the check's own ${VAR}s resolve; a parameter or file path filled in stays as it is.
    argv = _check_argv(plan, where, rule, values, environ)
    passed = (plan.content_hash, *argv)
    if passed in _checked:
        return
    key = hashlib.sha256(json.dumps([plan.content_hash, argv], sort_keys=True).encode()).hexdigest()
    marker = cache_root / "validated" / key
    if marker.exists():
        _checked.add(passed)
        return
    env = passthrough(list(plan.config.get("env_passthrough") or ["PATH"]), environ)
    confine = await site.confine() if site is not None else None  # in the tool's own sandbox
    result = await spawn(
        ProcessSpec(
            argv=argv,
            env=env,
            cwd=None if confine else workdir,
            confine=confine,
            stdin=None,
            timeout_s=_timeout(plan, where, rule),
            max_output_bytes=64 * 1024,
        )
    )
    if result.timed_out or result.exit_code != 0:
        out = (result.stderr or result.stdout).strip()
        said = rule.get("message")
        raise Refused(
            f"syntax check failed for {plan.tool_id}"
            + (f" ({said})" if said else "")
            + ": "
            + ("\n" + out if out else "timed out" if result.timed_out else "no output"),
            hint="fix the script and publish a new version",
        )
    marker.parent.mkdir(parents=True, exist_ok=True)
    marker.write_text(plan.tool_id + "\n")
    _checked.add(passed)
