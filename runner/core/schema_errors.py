"""JSON Schemas from the registry, compiled and their failures read, by jsonschema-rs alone.

Parameters (params.py) and declared outputs (outputs.py) are held to schemas a tenant wrote.
Both the verdict and the description of a failure come from jsonschema-rs: its patterns run on
a linear-time engine (linear_regex.py), where the pure-Python jsonschema would match them with
Python's backtracking `re` on the server's event loop. A failure is read from the error's kind
(the keyword and what it wants), never from its message, which quotes the value.
"""

from __future__ import annotations

import json
from collections.abc import Callable, Iterator
from dataclasses import dataclass
from itertools import islice
from typing import Any

import jsonschema_rs

from .linear_regex import NO_BACKTRACKING, PATTERN_OPTIONS
from .text import first_line

__all__ = ["MAX_DESCRIBED", "Failure", "compile_schema", "failures", "wants"]

# At most this many failures are described: the rest are counted (a record stays small).
MAX_DESCRIBED = 50


def compile_schema(schema: Any, retriever: Callable[[str], Any], *, draft_from_schema: bool) -> Any:
    """A jsonschema-rs validator of `schema` (Draft 2020-12, or the draft its `$schema` names),
    patterns on the linear engine; ValueError says why the schema cannot be used, naming the place."""
    build = jsonschema_rs.validator_for if draft_from_schema else jsonschema_rs.Draft202012Validator
    try:
        return build(schema, retriever=retriever, pattern_options=PATTERN_OPTIONS)
    except jsonschema_rs.ValidationError as e:
        where = "/".join(map(str, e.instance_path)) or "(root)"
        if e.kind.name == "format" and e.kind.as_dict().get("format") == "regex":
            raise ValueError(
                f"{where}: {e.instance!r} is not a regular expression this runner accepts: {NO_BACKTRACKING}"
            ) from None
        raise ValueError(f"{where}: {first_line(e.message) or e.kind.name}") from None
    except (ValueError, jsonschema_rs.ReferencingError) as e:
        raise ValueError(first_line(getattr(e, "message", None) or str(e)) or type(e).__name__) from None


@dataclass(frozen=True)
class Failure:
    """One place an instance breaks its schema: where, the keyword, what the keyword holds."""

    path: tuple[str | int, ...]
    rule: str
    details: dict[str, Any]
    instance: Any
    schema_path: tuple[str | int, ...]


def failures(validator: Any, instance: Any) -> tuple[list[Failure], int]:
    """The first MAX_DESCRIBED failures, and how many more there were (counted to MAX_DESCRIBED * 20)."""
    errors: Iterator[Any] = validator.iter_errors(instance)
    found = [
        Failure(tuple(e.instance_path), e.kind.name, _details(e.kind), e.instance, tuple(e.schema_path))
        for e in islice(errors, MAX_DESCRIBED)
    ]
    return found, sum(1 for _ in islice(errors, MAX_DESCRIBED * 20))


def _details(kind: Any) -> dict[str, Any]:
    try:
        return dict(kind.as_dict())
    except Exception:  # a kind that cannot say more: the keyword alone describes it
        return {}


_PHRASES = {
    "minimum": ">= {limit}",
    "maximum": "<= {limit}",
    "exclusiveMinimum": "> {limit}",
    "exclusiveMaximum": "< {limit}",
    "minLength": "at least {limit} characters long",
    "maxLength": "at most {limit} characters long",
    "minItems": "a list of at least {limit} items",
    "maxItems": "a list of at most {limit} items",
    "minProperties": "an object with at least {limit} properties",
    "maxProperties": "an object with at most {limit} properties",
    "pattern": "text matching {pattern}",
    "format": "a valid {format}",
    "multipleOf": "a multiple of {multiple_of}",
    "uniqueItems": "a list without duplicates",
}


def wants(failure: Failure) -> str | None:
    """`must be ...` for the keywords that say what they want in a few words (None otherwise)."""
    if failure.rule == "enum":
        return f"must be one of {json.dumps(failure.details.get('options'), default=str)}"
    if failure.rule == "const":
        return f"must be exactly {json.dumps(failure.details.get('expected_value'), default=str)}"
    phrase = _PHRASES.get(failure.rule)
    if phrase is None:
        return None
    try:
        return "must be " + phrase.format(**failure.details)
    except (KeyError, IndexError):
        return None
