"""Parameters and outputs the runner cannot compile are refused at publish, not at run.

An invalid `outputs` schema and a remote `$ref` were published and only refused when the
tool ran. SQL runs no meta-schema, so publish checks what is checkable (the type of each
known keyword, references inside the schema, patterns the runner's linear-time engine can
compile) and names the path. Each schema refused here is also one the runner refuses: the
registry is not stricter than the runner.
"""

from __future__ import annotations

from collections.abc import Iterator
from typing import Any

import pytest

from runner import KiwiError, Plan
from runner.core.outputs import output_contract
from runner.core.params import validate_params
from tests.security.publishing import Publisher, publishing


@pytest.fixture
def publisher(database_url: str) -> Iterator[Publisher]:
    with publishing(database_url) as p:
        yield p


def _outputs_plan(outputs: Any) -> Plan:
    return Plan(
        tool_id="t",
        version="1.0.0",
        tool_type="knowledge",
        content_hash="0" * 64,
        primitive=None,
        executor_id=None,
        chain=[],
        config={},
        parameters=None,
        files=[],
        outputs=outputs,
    )


def _runner_refuses_outputs(outputs: Any) -> bool:
    try:
        output_contract(_outputs_plan(outputs))
    except KiwiError:
        return True
    return False


def _runner_refuses_parameters(schema: dict[str, Any]) -> bool:
    try:
        validate_params("t", schema, {})
    except KiwiError as e:
        return "schema" in str(e) or "pattern" in str(e)
    return False


BAD_OUTPUTS = [
    ({"type": "objekt"}, "outputs.type: one of null, boolean, object"),
    ({"properties": []}, "outputs.properties: must be an object"),
    ({"properties": {"n": {"type": "integer", "minimum": "1"}}}, "outputs.properties.n.minimum: must be a number"),
    ({"required": "n"}, "outputs.required: must be a list of distinct property names"),
    (
        {"$ref": "https://example.com/schema.json"},
        'outputs.$ref: "https://example.com/schema.json" is not a reference inside',
    ),
    ({"properties": {"a": {"$ref": "other.json#/x"}}}, "outputs.properties.a.$ref:"),
    ({"anyOf": []}, "outputs.anyOf: must be a non-empty list of schemas"),
    ({"not": 5}, "outputs.not: must be a JSON Schema"),
    ({"items": [{"type": "string"}]}, "outputs.items: must be a JSON Schema"),
    ({"$schema": "http://example.com/mine"}, "outputs.$schema:"),
    ({"properties": {"s": {"pattern": "^(?!x)"}}}, "outputs.properties.s.pattern:"),
    ([{"name": "n", "type": "numbr"}], "outputs[1].type: one of"),
    ([{"type": "string"}], "outputs[1]: must be an object with a name"),
]

BAD_PARAMETERS = [
    ({"type": "object", "properties": {"a": {"type": "str"}}}, "parameters.properties.a.type: one of"),
    ({"type": "object", "properties": {"a": {"$ref": "https://evil.example/s.json"}}}, "parameters.properties.a.$ref:"),
    ({"type": "object", "properties": {"x": {"$dynamicRef": "http://x/y"}}}, "parameters.properties.x.$dynamicRef:"),
    (
        {"type": "object", "properties": {"a": {"type": "string", "minLength": -1}}},
        "minLength: must be a whole number >= 0",
    ),
    ({"type": "object", "properties": {"a": {"type": "string", "pattern": "(?=a)a"}}}, "(?="),
    ({"type": "object", "properties": {"a": {"type": "string", "pattern": "(?<!b)a"}}}, "(?<!"),
    ({"type": "object", "properties": {"a": {"type": "string", "pattern": "(a)\\1"}}}, "\\1"),
    ({"type": "object", "properties": {"a": {"type": "string", "pattern": "(?<n>a)\\k<n>"}}}, "\\k<"),
    ({"type": "object", "patternProperties": {"^(?=x)": {}}}, "parameters.patternProperties["),
]


@pytest.mark.parametrize(("outputs", "wanted"), BAD_OUTPUTS)
def test_outputs_the_runner_cannot_use_are_refused_naming_the_path(
    publisher: Publisher, outputs: Any, wanted: str
) -> None:
    assert _runner_refuses_outputs(outputs), "the runner refuses it too"
    message = publisher.refusal(publisher.manifest(tool_type="knowledge", executor=None, outputs=outputs), [])
    assert wanted in message


@pytest.mark.parametrize(("schema", "wanted"), BAD_PARAMETERS)
def test_parameters_the_runner_cannot_compile_are_refused_naming_the_path(
    publisher: Publisher, schema: dict[str, Any], wanted: str
) -> None:
    assert _runner_refuses_parameters(schema), "the runner refuses it too"
    assert wanted in publisher.refusal(publisher.manifest(parameters=schema))


def test_a_pattern_that_needs_backtracking_says_so(publisher: Publisher) -> None:
    schema = {"type": "object", "properties": {"a": {"type": "string", "pattern": "(?=a)a"}}}
    message = publisher.refusal(publisher.manifest(parameters=schema))
    assert "patterns must be regular expressions that need no backtracking" in message


def test_a_list_parameters_items_are_a_schema(publisher: Publisher) -> None:
    params = [{"name": "xs", "type": "array", "items": {"type": "string", "pattern": "(a)\\1"}}]
    assert "parameters[1].items.pattern:" in publisher.refusal(publisher.manifest(parameters=params))


GOOD = [
    {"type": "object", "properties": {"n": {"type": ["integer", "null"], "minimum": 0}}, "required": ["n"]},
    {"$schema": "http://json-schema.org/draft-07/schema#", "type": "array", "items": [{"type": "string"}]},
    {"$schema": "http://json-schema.org/draft-04/schema#", "type": "number", "maximum": 3, "exclusiveMaximum": True},
    {"$defs": {"n": {"type": "integer"}}, "properties": {"a": {"$ref": "#/$defs/n"}}},
    {"type": "string", "pattern": "^[a-z]+(\\.[a-z]+)*$", "x-note": "kept"},
]


@pytest.mark.parametrize("outputs", GOOD)
def test_schemas_the_runner_compiles_are_published(publisher: Publisher, outputs: dict[str, Any]) -> None:
    assert not _runner_refuses_outputs(outputs)
    answer = publisher.publish(publisher.manifest(tool_type="knowledge", executor=None, outputs=outputs), [])
    assert answer["created"] is True


def test_a_backtracking_pattern_without_lookaround_is_published(publisher: Publisher) -> None:
    """`^(a+)+$` is matched in linear time by the runner's engine: nothing to refuse."""
    schema = {"type": "object", "properties": {"a": {"type": "string", "pattern": "^(a+)+$"}}}
    assert publisher.publish(publisher.manifest(parameters=schema))["created"] is True
