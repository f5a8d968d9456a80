"""Parameters are checked against the tool's JSON Schema before anything runs.

The verdict is jsonschema-rs's (Draft 2020-12, formats as annotations, no remote $ref):
it costs a fraction of a microsecond, where the pure-Python jsonschema costs tens on a
busy server. Only parameters it refuses are described, by jsonschema (imported then),
whose errors say which field and what the schema wants; the error lists every bad field
at once, so a person (or an agent) fixes them in one go, and never quotes the values.
"""

from __future__ import annotations

import json
import math
from collections.abc import Iterator, Mapping
from functools import lru_cache
from typing import Any

import jsonschema_rs

from ..errors import InvalidParameters, Refused
from .identity import ByIdentity
from .text import first_line, is_utf8


def _no_remote_refs(uri: str) -> Any:
    raise ValueError(f"a parameter schema may not fetch {uri}: only references inside the schema are followed")


@lru_cache(maxsize=512)
def _validator(schema_json: str) -> jsonschema_rs.Draft202012Validator:
    try:
        return jsonschema_rs.Draft202012Validator(json.loads(schema_json), retriever=_no_remote_refs)
    except (jsonschema_rs.ValidationError, ValueError) as e:
        reason = first_line(getattr(e, "message", None) or str(e)) or type(e).__name__
        raise Refused(f"the tool's parameter schema is invalid: {reason}") from e


# A cached plan hands back the same parameters dict on every run: its validator is then
# found without serialising the schema (identity.py).
_validator_for = ByIdentity(lambda schema: _validator(json.dumps(schema, sort_keys=True)))


def validate_params(tool_id: str, schema: Mapping[str, Any] | None, params: Any) -> dict[str, Any]:
    """Return the parameters with schema defaults filled in, or raise InvalidParameters."""
    if not isinstance(params, dict):
        raise InvalidParameters(tool_id, [f"parameters must be a JSON object, not {type(params).__name__}"])
    unrepresentable = sorted(set(_not_json(params)))
    if unrepresentable:
        raise InvalidParameters(tool_id, unrepresentable)
    if not schema:
        return dict(params)
    filled = dict(params)
    for name, prop in (schema.get("properties") or {}).items():
        if name not in filled and isinstance(prop, dict) and "default" in prop:
            filled[name] = prop["default"]
    validator = _validator_for(schema)
    if not validator.is_valid(filled):
        raise InvalidParameters(tool_id, _problems(schema, validator, filled))
    return filled


def _problems(schema: Mapping[str, Any], validator: jsonschema_rs.Draft202012Validator, filled: Any) -> list[str]:
    """Every refused field, described by jsonschema; should it find nothing where jsonschema-rs
    found something, the places jsonschema-rs names (never the values)."""
    from jsonschema import Draft202012Validator

    described = Draft202012Validator(schema).iter_errors(filled)
    problems = sorted(line for e in described for line in _describe(e).split("; "))
    return problems or sorted(
        f"{'.'.join(map(str, e.instance_path)) or '(parameters)'}: does not satisfy the schema at "
        f"{'/'.join(map(str, e.schema_path))}"
        for e in validator.iter_errors(filled)
    )


def _not_json(value: Any) -> Iterator[str]:
    """Where `value` holds what JSON text cannot carry to a tool: a name that is not text, a lone
    surrogate (not encodable as UTF-8), NaN or an infinity, a non-JSON type, or a cycle."""
    stack: list[tuple[str, Any, frozenset[int]]] = [("", value, frozenset())]
    while stack:
        path, item, ancestors = stack.pop()
        where = path or "(parameters)"
        if isinstance(item, str):
            if not is_utf8(item):
                yield f"{where}: must be valid Unicode text (it holds a lone surrogate)"
        elif isinstance(item, float):
            if not math.isfinite(item):
                yield f"{where}: must be a finite number"
        elif isinstance(item, dict | list | tuple):
            if id(item) in ancestors:
                yield f"{where}: must not contain itself"
                continue
            inner = ancestors | {id(item)}
            if isinstance(item, dict):
                for key, child in item.items():
                    if not isinstance(key, str) or not is_utf8(key):
                        yield f"{where}: parameter names must be valid Unicode text"
                        continue
                    stack.append((f"{path}.{key}" if path else key, child, inner))
            else:
                stack.extend((f"{path}.{i}" if path else str(i), child, inner) for i, child in enumerate(item))
        elif item is not None and not isinstance(item, bool | int):
            yield f"{where}: must be a JSON value, not {type(item).__name__}"


_RULES = {
    "minimum": ">= {}",
    "maximum": "<= {}",
    "exclusiveMinimum": "> {}",
    "exclusiveMaximum": "< {}",
    "minLength": "at least {} characters long",
    "maxLength": "at most {} characters long",
    "minItems": "a list of at least {} items",
    "maxItems": "a list of at most {} items",
    "pattern": "text matching {}",
    "format": "a valid {}",
    "const": "exactly {}",
    "multipleOf": "a multiple of {}",
    "uniqueItems": "a list without duplicates",
}


def _describe(error: Any) -> str:
    """Say what the schema wants, never echo the value given: these lines reach run records."""
    path = ".".join(str(p) for p in error.absolute_path)
    rule, want = error.validator, error.validator_value
    if rule == "required":
        missing = [name for name in want if isinstance(error.instance, dict) and name not in error.instance]
        return "; ".join(f"{(path + '.') if path else ''}{name}: required" for name in missing) or "required"
    where = path or "(parameters)"
    if rule == "additionalProperties":
        allowed = set((error.schema.get("properties") or {}).keys())
        extra = sorted(str(k) for k in (error.instance or {}) if k not in allowed)
        return f"{where}: unexpected parameter{'s' if len(extra) > 1 else ''} {', '.join(extra)}"
    if rule == "type":
        return f"{where}: must be of type {' or '.join(want) if isinstance(want, list) else want}"
    if rule == "enum":
        return f"{where}: must be one of {json.dumps(want)}"
    if rule in _RULES:
        return f"{where}: must be {_RULES[rule].format(json.dumps(want) if rule == 'const' else want)}"
    return f"{where}: does not satisfy the schema's {rule!r} rule"


def coerce_strings(schema: Mapping[str, Any] | None, raw: Mapping[str, str]) -> dict[str, Any]:
    """`-p key=value` values arrive as text: read them as JSON where the schema wants a non-string."""
    props = (schema or {}).get("properties") or {}
    out: dict[str, Any] = {}
    for key, text in raw.items():
        wanted = (props.get(key) or {}).get("type")
        types = set(wanted) if isinstance(wanted, list) else {wanted} if wanted else set()
        if types and types <= {"string"}:
            out[key] = text
            continue
        try:
            out[key] = json.loads(text)
        except ValueError:
            out[key] = text
    return out
