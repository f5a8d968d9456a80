"""Parameters checked against the tool's JSON Schema before anything runs (runner/params.py)."""

from __future__ import annotations

import pytest

from runner.errors import InvalidParameters
from runner.params import coerce_strings, validate_params

SCHEMA = {
    "type": "object",
    "required": ["bytes"],
    "properties": {
        "bytes": {"type": "integer", "minimum": 0},
        "binary": {"type": "boolean", "default": False},
        "label": {"type": "string"},
    },
    "additionalProperties": False,
}


def test_defaults_are_filled_in() -> None:
    assert validate_params("t", SCHEMA, {"bytes": 10}) == {"bytes": 10, "binary": False}


def test_every_bad_field_is_listed_at_once() -> None:
    with pytest.raises(InvalidParameters) as info:
        validate_params("format_bytes", SCHEMA, {"binary": "yes", "label": 3, "extra": 1})
    problems = info.value.problems
    assert any(p.startswith("bytes: required") for p in problems)
    assert any(p.startswith("binary:") and "boolean" in p for p in problems)
    assert any(p.startswith("label:") and "string" in p for p in problems)
    assert any("extra" in p for p in problems)
    assert "format_bytes" in str(info.value) and "kiwi show format_bytes" in (info.value.hint or "")


def test_parameters_must_be_an_object() -> None:
    with pytest.raises(InvalidParameters, match="must be a JSON object"):
        validate_params("t", SCHEMA, [1, 2])


def test_a_tool_without_schema_takes_any_object() -> None:
    assert validate_params("t", None, {"x": 1}) == {"x": 1}


def test_command_line_values_follow_the_schema() -> None:
    raw = {"bytes": "1024", "binary": "true", "label": "123", "free": "[1,2]", "text": "not json"}
    assert coerce_strings(SCHEMA, raw) == {
        "bytes": 1024,
        "binary": True,
        "label": "123",
        "free": [1, 2],
        "text": "not json",
    }


def test_problems_say_what_the_schema_wants_without_echoing_values() -> None:
    """Regression: jsonschema's messages quoted the value given, and they reached run records."""
    schema = {"type": "object", "properties": {"n": {"type": "integer", "maximum": 5}, "s": {"enum": ["a", "b"]}}}
    with pytest.raises(InvalidParameters) as info:
        validate_params("t", schema, {"n": "secret-ish-value", "s": "other-private-text"})
    text = str(info.value)
    assert "secret-ish-value" not in text and "other-private-text" not in text
    assert "n: must be of type integer" in text and 's: must be one of ["a", "b"]' in text
    with pytest.raises(InvalidParameters, match="n: must be <= 5"):
        validate_params("t", schema, {"n": 99})
