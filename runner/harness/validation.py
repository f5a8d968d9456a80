"""Checks a runtime declares, run before a tool does, with no per-runtime code.

    validation:
      syntax_check: {command: bash, args: [-n, "{entrypoint}"]}
      patterns:
        - {pattern: 'rm\\s+-rf\\s+/', action: block, message: ...}
        - {pattern: '\\beval\\(', action: warn, message: ...}

Patterns are regular expressions searched in every text file of the tool; `block`
refuses the run, `warn` lets it go with a warning. The syntax check runs once per
(tool content, rules, environment): its success is remembered under the cache.
"""

from __future__ import annotations

import hashlib
import json
import re
from collections.abc import Mapping
from pathlib import Path
from typing import Any

from ..core.expand import fill, render_argv
from ..core.plan import Plan
from ..errors import ConfigError, Refused
from ..primitives.subprocess import ProcessSpec, passthrough, spawn

# Pattern findings per chain: the rules come from the chain's configs and the text from
# the tool's files, and every element's content_hash pins both.
_findings: dict[tuple[str, ...], tuple[list[str], list[str]]] = {}
# Syntax checks passed in this process (also marked on disk, for the next process).
_checked: set[str] = set()


def pattern_findings(plan: Plan, rules: list[Mapping[str, Any]]) -> tuple[list[str], list[str]]:
    """(blocking, warnings) messages, each naming the file and line."""
    key = (plan.content_hash, *(link.content_hash for link in plan.chain))
    if key not in _findings:
        _findings[key] = _scan(plan, rules)
    blocking, warnings = _findings[key]
    return list(blocking), list(warnings)


def _scan(plan: Plan, rules: list[Mapping[str, Any]]) -> tuple[list[str], list[str]]:
    blocking: list[str] = []
    warnings: list[str] = []
    for rule in rules:
        try:
            regex = re.compile(rule["pattern"], re.MULTILINE)
        except (KeyError, re.error) as e:
            raise ConfigError(f"invalid validation pattern {rule.get('pattern')!r}: {e}") from e
        action = rule.get("action", "warn")
        if action not in ("warn", "block"):
            raise ConfigError(f"validation action must be warn or block, not {action!r}")
        for f in plan.files:
            if f.content_text is None:
                continue
            m = regex.search(f.content_text)
            if m:
                line = f.content_text.count("\n", 0, m.start()) + 1
                text = f"{f.path}:{line}: {rule.get('message') or 'matches ' + rule['pattern']}"
                (blocking if action == "block" else warnings).append(text)
    return blocking, warnings


async def validate(
    plan: Plan, workdir: Path | None, values: Mapping[str, Any], environ: Mapping[str, str], cache_root: Path
) -> list[str]:
    """Run the declared checks; return warnings, raise Refused when a check blocks."""
    spec = plan.config.get("validation") or {}
    if not spec:
        return []
    blocking, warnings = pattern_findings(plan, list(spec.get("patterns") or []))
    if blocking:
        raise Refused(
            "validation blocked the run:\n" + "\n".join(f"  - {b}" for b in blocking),
            hint="the runtime's validation rules refuse this content",
        )
    check = spec.get("syntax_check")
    if check and workdir is not None:
        await _syntax_check(plan, check, workdir, values, environ, cache_root)
    return warnings


async def _syntax_check(
    plan: Plan,
    check: Mapping[str, Any],
    workdir: Path,
    values: Mapping[str, Any],
    environ: Mapping[str, str],
    cache_root: Path,
) -> None:
    # One pass: the check's own ${VAR}s resolve; a parameter or file path filled in stays as it is.
    command = fill(str(check["command"]), values, environ=environ)
    argv = [command, *render_argv(list(check.get("args") or []), values, environ)]
    key = hashlib.sha256(json.dumps([plan.content_hash, argv], sort_keys=True).encode()).hexdigest()
    marker = cache_root / "validated" / key
    if key in _checked or marker.exists():
        _checked.add(key)
        return
    env = passthrough(list(plan.config.get("env_passthrough") or ["PATH"]), environ)
    result = await spawn(
        ProcessSpec(
            argv=argv,
            env=env,
            cwd=workdir,
            stdin=None,
            timeout_s=float(check.get("timeout_s", 60)),
            max_output_bytes=64 * 1024,
        )
    )
    if result.timed_out or result.exit_code != 0:
        out = result.stderr or result.stdout
        text = out.decode("utf-8", "replace") if isinstance(out, bytes) else out
        raise Refused(
            f"syntax check failed for {plan.tool_id}: " + ("\n" + text.strip() if text.strip() else "no output"),
            hint="fix the script and publish a new version",
        )
    marker.parent.mkdir(parents=True, exist_ok=True)
    marker.write_text(plan.tool_id + "\n")
    _checked.add(key)
