"""Two kinds of substitution, kept apart on purpose.

* `${VAR}`, `${VAR:-default}`, `${VAR:+alt}`: secrets and settings from the runner's
  environment, resolved at run time and never written back to the registry.
* `{name}` and `{name...}`: values known to the run (parameters, `{entrypoint}`,
  `{env_dir}`). In an argv list, a placeholder makes one argv item (`{name...}` spreads
  a list into several), so a value is never parsed by a shell.

A template (a string from the registry: the tool's merged config) is rendered in one
pass: its `${VAR}`s are resolved and its placeholders filled side by side, and nothing
inserted is looked at again. So a parameter or a file path holding `${SECRET}` stays that
text (a caller can neither read the runner's environment nor learn which variables are
set), and a secret holding `{name}` is never read as a placeholder.
"""

from __future__ import annotations

import json
import re
from collections.abc import Callable, Mapping
from typing import Any

from ..errors import ConfigError

_VAR = re.compile(r"\$\{([A-Za-z_][A-Za-z0-9_]*)(?:(:-|:\+)([^}]*))?\}")
_PLACEHOLDER = re.compile(r"\{([A-Za-z_][A-Za-z0-9_]*)(\.\.\.)?\}")


def expand_vars(text: str, environ: Mapping[str, str]) -> str:
    """Resolve every ${VAR} form in `text`; an unset ${VAR} without a default is an error naming it."""

    def one(m: re.Match[str]) -> str:
        name, op, word = m.group(1), m.group(2), m.group(3)
        value = environ.get(name)
        if op == ":-":
            return value if value else word
        if op == ":+":
            return word if value else ""
        if value is None:
            raise ConfigError(
                f"environment variable {name} is not set",
                hint=f"export {name}=... before running, or give a default: ${{{name}:-value}}",
            )
        return value

    return _VAR.sub(one, text)


def map_strings(value: Any, fn: Callable[[str], Any]) -> Any:
    """fn over every string inside dicts and lists (keys are left alone)."""
    if isinstance(value, str):
        return fn(value)
    if isinstance(value, list):
        return [map_strings(v, fn) for v in value]
    if isinstance(value, dict):
        return {k: map_strings(v, fn) for k, v in value.items()}
    return value


def expand_vars_deep(value: Any, environ: Mapping[str, str]) -> Any:
    """expand_vars over every string inside dicts and lists (keys are left alone)."""
    return map_strings(value, lambda text: expand_vars(text, environ))


def variables_in(value: Any) -> set[str]:
    """Names of the ${VAR}s a config refers to (what a run may need from its environment)."""
    if isinstance(value, str):
        return {m.group(1) for m in _VAR.finditer(value)}
    if isinstance(value, list):
        return set().union(*(variables_in(v) for v in value)) if value else set()
    if isinstance(value, dict):
        return set().union(*(variables_in(v) for v in value.values())) if value else set()
    return set()


def as_text(value: Any) -> str:
    """How a value reads in argv, env or a URL: strings as they are, everything else as JSON."""
    if isinstance(value, str):
        return value
    return json.dumps(value, separators=(",", ":"), ensure_ascii=False)


def fill(text: str, values: Mapping[str, Any], *, strict: bool = True, environ: Mapping[str, str] | None = None) -> str:
    """Render one template: {name} placeholders from `values`, in the same single pass as its
    ${VAR}s from `environ` (left as written when environ is None, as for a cache key).

    strict: an unknown name is an error; otherwise it is left as written (for text that
    may hold literal braces, such as a JSON body).
    """

    def one(m: re.Match[str]) -> str:
        name = m.group(1)
        if name in values and values[name] is not None:
            v = values[name]
            return " ".join(as_text(x) for x in v) if m.group(2) and isinstance(v, list) else as_text(v)
        if strict:
            raise ConfigError(f"placeholder {{{name}}} has no value", hint=_known(values))
        return m.group(0)

    parts = _VAR.split(text)  # literal, then 3 groups per ${VAR} (name, op, word), literal, ...
    out: list[str] = []
    for i in range(0, len(parts), 4):
        out.append(_PLACEHOLDER.sub(one, parts[i]))
        if i + 1 < len(parts):
            ref = _var_text(parts[i + 1 : i + 4])
            out.append(ref if environ is None else expand_vars(ref, environ))
    return "".join(out)


def _var_text(groups: list[str | None]) -> str:
    """A ${VAR} reference written back from its split groups."""
    name, op, word = groups
    return "${" + str(name) + (f"{op}{word}" if op else "") + "}"


def render_argv(items: list[Any], values: Mapping[str, Any], environ: Mapping[str, str] | None = None) -> list[str]:
    """Template an argv list. `{name}` alone is one item; `{name...}` spreads a list (none when
    empty); ${VAR}s come from `environ` in the same pass (see fill)."""
    argv: list[str] = []
    for item in items:
        if not isinstance(item, str):
            argv.append(as_text(item))
            continue
        whole = _PLACEHOLDER.fullmatch(item)
        if whole and whole.group(2):
            name = whole.group(1)
            if name not in values:
                raise ConfigError(f"placeholder {{{name}...}} has no value", hint=_known(values))
            v = values[name]
            argv.extend(as_text(x) for x in (v if isinstance(v, list) else [] if v is None else [v]))
        else:
            argv.append(fill(item, values, environ=environ))
    return argv


def fill_deep(value: Any, values: Mapping[str, Any]) -> Any:
    """Templates for structured bodies: a string that is exactly "{name}" takes the value itself
    (so numbers stay numbers); other strings get the value's text; unknown names stay as written."""
    if isinstance(value, str):
        whole = _PLACEHOLDER.fullmatch(value)
        if whole and not whole.group(2) and whole.group(1) in values:
            return values[whole.group(1)]
        return fill(value, values, strict=False)
    if isinstance(value, list):
        return [fill_deep(v, values) for v in value]
    if isinstance(value, dict):
        return {k: fill_deep(v, values) for k, v in value.items()}
    return value


def _known(values: Mapping[str, Any]) -> str:
    return "known placeholders: " + (", ".join(sorted(values)) or "none")
