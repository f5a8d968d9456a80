"""Parameters are checked against the tool's JSON Schema before anything runs.

First their shape, without recursion and with an early exit: at most MAX_PARAM_DEPTH levels
deep and MAX_PARAMS_SIZE in all (text counted in characters), values JSON can carry. Then the
schema, by jsonschema-rs (Draft 2020-12, formats as annotations, no remote $ref, patterns on a
linear-time engine: linear_regex.py), which also describes what it refuses (schema_errors.py):
the error lists every bad field at once, so a person (or an agent) fixes them in one go, and
never quotes the values. Every step is linear in the parameters' size, which is capped, so a
tenant's schema cannot hold the server's event loop.
"""

from __future__ import annotations

import json
import math
from collections.abc import Iterator, Mapping
from functools import lru_cache
from typing import Any

from ..errors import InvalidParameters, Refused
from .flat import flat
from .identity import ByIdentity
from .schema_errors import Failure, compile_schema, failures, wants
from .text import is_utf8

__all__ = ["MAX_PARAMS_SIZE", "MAX_PARAM_DEPTH", "coerce_strings", "json_depth_exceeds", "validate_params"]

# How deep parameters may nest (objects and lists), and how large they may be in all: text in
# characters, each other value, key or container as 8. Checked before the schema, at every entry.
MAX_PARAM_DEPTH = 64
MAX_PARAMS_SIZE = 8 * 1024 * 1024


def _no_remote_refs(uri: str) -> Any:
    raise ValueError(f"a parameter schema may not fetch {uri}: only references inside the schema are followed")


@lru_cache(maxsize=512)
def _validator(schema_json: str) -> Any:
    try:
        return compile_schema(json.loads(schema_json), _no_remote_refs, draft_from_schema=False)
    except ValueError as e:
        raise Refused(f"the tool's parameter schema is invalid: {e}") from e


# A cached plan hands back the same parameters dict on every run: its validator is then
# found without serialising the schema (identity.py).
_validator_for = ByIdentity(lambda schema: _validator(json.dumps(schema, sort_keys=True)))


def validate_params(tool_id: str, schema: Mapping[str, Any] | None, params: Any) -> dict[str, Any]:
    """Return the parameters with schema defaults filled in, or raise InvalidParameters."""
    if not isinstance(params, dict):
        raise InvalidParameters(tool_id, [f"parameters must be a JSON object, not {type(params).__name__}"])
    if not _flat_json(params):
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
        raise InvalidParameters(tool_id, _problems(validator, filled))
    return filled


def _problems(validator: Any, filled: Any) -> list[str]:
    """Every refused field (the first schema_errors.MAX_DESCRIBED), never its value."""
    found, more = failures(validator, filled)
    problems = sorted({line for f in found for line in _describe(f)})
    return problems + ([f"(and {more} more)"] if more else [])


def json_depth_exceeds(text: str, limit: int = MAX_PARAM_DEPTH) -> bool:
    """Whether JSON `text` nests deeper than `limit`, seen before parsing it (json.loads
    recurses, and a deep enough document is a RecursionError): brackets outside strings."""
    depth, in_string, escaped = 0, False, False
    for c in text:
        if in_string:
            escaped, in_string = (False, True) if escaped else (c == "\\", c != '"')
        elif c == '"':
            in_string = True
        elif c in "[{":
            depth += 1
            if depth > limit:
                return True
        elif c in "]}":
            depth -= 1
    return False


def _flat_json(params: dict[Any, Any]) -> bool:
    """Whether `params` is what most calls send, an object of text, numbers, booleans and
    nulls that JSON carries as they are: then _not_json would find nothing, and the walk is
    skipped. (The same size as _not_json counts it; anything else goes to _not_json.)"""
    found = flat(params)
    if found is None or found.unencodable or found.nonfinite:
        return False
    return 8 + found.key_chars + found.text_chars + 8 * found.others <= MAX_PARAMS_SIZE


def _not_json(value: Any) -> Iterator[str]:
    """Where `value` holds what JSON text cannot carry to a tool: a name that is not text, a lone
    surrogate (not encodable as UTF-8), NaN or an infinity, a non-JSON type, or a cycle; or
    that it nests deeper than MAX_PARAM_DEPTH or is larger than MAX_PARAMS_SIZE (then it stops)."""
    stack: list[tuple[str, Any, frozenset[int]]] = [("", value, frozenset())]
    size = 0
    while stack:
        path, item, ancestors = stack.pop()
        where = path or "(parameters)"
        size += len(item) if isinstance(item, str) else 8
        if size > MAX_PARAMS_SIZE:
            yield f"(parameters): must be at most {MAX_PARAMS_SIZE // 2**20} MiB in all (text counted in characters)"
            return
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
            if len(ancestors) >= MAX_PARAM_DEPTH:
                yield f"{path.split('.', 1)[0]}: parameters may nest at most {MAX_PARAM_DEPTH} levels deep"
                return
            inner = ancestors | {id(item)}
            if isinstance(item, dict):
                for key, child in item.items():
                    if not isinstance(key, str) or not is_utf8(key):
                        yield f"{where}: parameter names must be valid Unicode text"
                        continue
                    size += len(key)
                    stack.append((f"{path}.{key}" if path else key, child, inner))
            else:
                stack.extend((f"{path}.{i}" if path else str(i), child, inner) for i, child in enumerate(item))
        elif item is not None and not isinstance(item, bool | int):
            yield f"{where}: must be a JSON value, not {type(item).__name__}"


def _describe(failure: Failure) -> Iterator[str]:
    """Say what the schema wants, never echo the value given: these lines reach run records."""
    path = ".".join(str(p) for p in failure.path)
    where = path or "(parameters)"
    rule, details = failure.rule, failure.details
    if rule == "required":
        yield f"{(path + '.') if path else ''}{details.get('property')}: required"
    elif rule in ("additionalProperties", "unevaluatedProperties") and details.get("unexpected"):
        extra = sorted(str(k) for k in details["unexpected"])
        yield f"{where}: unexpected parameter{'s' if len(extra) > 1 else ''} {', '.join(extra)}"
    elif rule == "type":
        types = details.get("types") or []
        yield f"{where}: must be of type {' or '.join(map(str, types))}"
    else:
        yield f"{where}: " + (wants(failure) or f"does not satisfy the schema's {rule!r} rule")


def coerce_strings(
    schema: Mapping[str, Any] | None, raw: Mapping[str, str], tool_id: str = "the tool"
) -> dict[str, Any]:
    """`-p key=value` values arrive as text: read them as JSON where the schema wants a non-string
    (nested no deeper than MAX_PARAM_DEPTH, seen before json.loads recurses)."""
    props = (schema or {}).get("properties") or {}
    out: dict[str, Any] = {}
    for key, text in raw.items():
        wanted = (props.get(key) or {}).get("type")
        types = set(wanted) if isinstance(wanted, list) else {wanted} if wanted else set()
        if types and types <= {"string"}:
            out[key] = text
            continue
        if json_depth_exceeds(text):
            raise InvalidParameters(tool_id, [f"{key}: parameters may nest at most {MAX_PARAM_DEPTH} levels deep"])
        try:
            out[key] = json.loads(text)
        except ValueError:
            out[key] = text
    return out
