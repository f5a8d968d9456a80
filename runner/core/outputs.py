"""A tool's declared `outputs`: the JSON Schema a successful run's output is held to.

A manifest's `outputs` is a JSON Schema (an object), or a list written as parameters are
(`[{name, type, required, description, enum, items}]`), read as an object schema with
those properties. A root that names object keywords (properties, required, ...) but no
`type` is an object schema: text output does not slip past it. After a successful run
the output (what the tool printed, parsed as JSON when it is JSON; an MCP tool's
structuredContent) must satisfy it, else the run is an error naming each place that does
not (OutputMismatch).

The verdict and its description are jsonschema-rs's, as for parameters (params.py,
schema_errors.py: the draft a schema's `$schema` names, else 2020-12; formats as annotations;
no remote `$ref`; patterns on a linear-time engine). A run of a tool that declares no outputs
loads neither (jsonschema-rs is imported when declared outputs are first compiled).
Descriptions say where and what the schema wants, never the value found, since they reach run
records, which hold no outputs.
"""

from __future__ import annotations

import json
from collections.abc import Iterator, Sequence
from dataclasses import dataclass
from functools import lru_cache
from typing import TYPE_CHECKING, Any

from ..errors import ConfigError, KiwiError
from .identity import ByIdentity
from .plan import Plan

if TYPE_CHECKING:
    from .schema_errors import Failure

__all__ = ["OutputContract", "OutputMismatch", "output_contract", "output_schema"]

# Keywords that only constrain objects: a root with one of these and no `type` means an object.
_OBJECT_WORDS = frozenset(
    {"properties", "required", "additionalProperties", "patternProperties", "minProperties", "maxProperties"}
)
# What a list entry may say of its output, as parameters' list form says of a parameter.
_LIST_KEYS = ("type", "description", "enum", "items", "properties", "format")


class OutputMismatch(KiwiError):
    """A tool ran and returned what its declared `outputs` do not allow; `problems` lists each place."""

    kind = "output_mismatch"

    def __init__(self, tool_id: str, problems: list[str]) -> None:
        lines = "\n".join(f"  - {p}" for p in problems)
        super().__init__(
            f"{tool_id}: the output does not match the tool's declared outputs:\n{lines}",
            hint=f"the tool returned what its `outputs` schema does not allow: fix the tool or its outputs "
            f"(see them with: kiwi show {tool_id})",
        )
        self.problems = problems


def output_schema(outputs: Any) -> dict[str, Any] | None:
    """The JSON Schema form of a manifest's `outputs`; None when nothing is declared. Outputs
    that are neither form raise ValueError, naming the field."""
    if outputs is None or outputs == {} or outputs == []:
        return None
    if isinstance(outputs, dict):
        if "type" not in outputs and _OBJECT_WORDS.intersection(outputs):
            return {"type": "object", **outputs}
        return outputs
    if not isinstance(outputs, list):
        raise ValueError(
            f"outputs: must be a JSON Schema (an object) or a list of {{name, type}}, not {type(outputs).__name__}"
        )
    properties: dict[str, Any] = {}
    required: list[str] = []
    for i, entry in enumerate(outputs):
        name = entry.get("name") if isinstance(entry, dict) else None
        if not isinstance(name, str) or not name:
            raise ValueError(f"outputs[{i}]: must be an object with a name (e.g. {{name: count, type: integer}})")
        properties[name] = {k: entry[k] for k in _LIST_KEYS if k in entry}
        if entry.get("required") is True:
            required.append(name)
    return {"type": "object", "properties": properties, **({"required": required} if required else {})}


@dataclass(frozen=True)
class OutputContract:
    """A tool's outputs, compiled: `mismatch(output)` is None when the output satisfies them."""

    tool_id: str
    schema: dict[str, Any]
    validator: Any  # a jsonschema-rs validator

    def mismatch(self, output: Any) -> OutputMismatch | None:
        if self.validator.is_valid(output):
            return None
        return OutputMismatch(self.tool_id, _problems(self.validator, output))


def output_contract(plan: Plan) -> OutputContract | None:
    """The plan's outputs as a contract (None: none declared). A schema that cannot be used
    (not a JSON Schema, a remote $ref) is a ConfigError naming `outputs`, raised before the
    tool runs. Compiled once per plan's `outputs` object (a cached plan keeps its own)."""
    if plan.outputs is None:
        return None
    schema, validator, problem = _compiled(plan.outputs)
    if problem is not None:
        raise ConfigError(
            f"{plan.tool_id}: {problem}",
            hint="outputs must be a JSON Schema (or a list of {name, type}); fix it and publish a new version",
        )
    return None if schema is None else OutputContract(plan.tool_id, schema, validator)


def _compile(outputs: Any) -> tuple[dict[str, Any] | None, Any, str | None]:
    """(schema, validator, None), or (None, None, why the declared outputs cannot be used)."""
    try:
        schema = output_schema(outputs)
    except ValueError as e:
        return None, None, str(e)
    if schema is None:
        return None, None, None
    try:
        return schema, _validator(json.dumps(schema, sort_keys=True)), None
    except ValueError as e:
        return None, None, f"outputs: not a usable JSON Schema: {e}"


_compiled = ByIdentity(_compile, max_size=512)


def _no_remote_refs(uri: str) -> Any:
    raise ValueError(f"an outputs schema may not fetch {uri}: only references inside the schema are followed")


@lru_cache(maxsize=256)
def _validator(schema_json: str) -> Any:
    from .schema_errors import compile_schema

    return compile_schema(json.loads(schema_json), _no_remote_refs, draft_from_schema=True)


def _problems(fast: Any, output: Any) -> list[str]:
    """Each place the output breaks the schema (the first schema_errors.MAX_DESCRIBED), never its value."""
    from .schema_errors import failures

    found, more = failures(fast, output)
    described = sorted({line for f in found for line in _describe(f)})
    return described + ([f"(and {more} more)"] if more else [])


def _where(path: Sequence[Any]) -> str:
    """`output.items[0].count`: the place in the output, never its value."""
    return "output" + "".join(f"[{p}]" if isinstance(p, int) else f".{p}" for p in path)


def _json_type(value: Any) -> str:
    if value is None:
        return "null"
    if isinstance(value, bool):
        return "boolean"
    if isinstance(value, int):
        return "integer"
    if isinstance(value, float):
        return "number"
    if isinstance(value, str):
        return "string"
    if isinstance(value, list | tuple):
        return "array"
    return "object" if isinstance(value, dict) else type(value).__name__


def _describe(failure: Failure) -> Iterator[str]:
    from .schema_errors import wants

    where, rule, details, found = _where(failure.path), failure.rule, failure.details, failure.instance
    if rule == "required":
        yield f"{where}.{details.get('property')}: required"
    elif rule == "type":
        wanted = " or ".join(map(str, details.get("types") or []))
        text = " (the tool's output was text, not JSON)" if not failure.path and isinstance(found, str) else ""
        yield f"{where}: must be of type {wanted}, not {_json_type(found)}{text}"
    elif rule in ("additionalProperties", "unevaluatedProperties") and details.get("unexpected"):
        extra = sorted(str(k) for k in details["unexpected"])
        yield f"{where}: unexpected propert{'ies' if len(extra) > 1 else 'y'} {', '.join(extra)}"
    else:
        yield f"{where}: " + (wants(failure) or f"does not satisfy the schema's {rule!r} rule")
