"""A tool's declared `outputs` (issue 15, item 3): after a successful run the output is held to
them; a mismatch is an error run, recorded, naming each place and never the value found."""

from __future__ import annotations

import json
import subprocess
import sys
from collections.abc import Callable
from pathlib import Path
from typing import Any

import psycopg
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from runner import ConfigError, Plan, Runner
from runner.core.outputs import OutputMismatch, output_contract, output_schema
from tests.conftest import ROOT
from tests.kiwi_cli import kiwi_env, run_kiwi

COUNTED = {"type": "object", "properties": {"count": {"type": "integer"}, "label": {"type": "string"}}}


def script(publish_tool: Callable[..., str], body: str, outputs: Any) -> str:
    manifest: dict[str, Any] = {"tool_type": "script", "executor": "bash_runtime"}
    if outputs is not None:
        manifest["outputs"] = outputs
    return publish_tool("outputs", manifest, {"run.sh": body}, entrypoint="run.sh")


async def record(runner: Runner, conn: psycopg.Connection, run_id: str | None) -> tuple[str, str | None]:
    assert run_id
    await runner.flush_records()
    row = conn.execute("select status, error_summary from tool_runs where id = %s", (run_id,)).fetchone()
    assert row is not None
    return row[0], row[1]


def plan_with(outputs: Any) -> Plan:
    return Plan.from_json(
        {"tool_id": "t", "version": "1.0.0", "tool_type": "script", "content_hash": "0" * 64, "outputs": outputs}
    )


# --- the contract, without a database --------------------------------------------------------


def test_the_list_form_and_a_typeless_object_schema_are_object_schemas() -> None:
    listed = [{"name": "count", "type": "integer", "required": True}, {"name": "note", "description": "free"}]
    assert output_schema(listed) == {
        "type": "object",
        "properties": {"count": {"type": "integer"}, "note": {"description": "free"}},
        "required": ["count"],
    }
    assert output_schema({"properties": {"a": {}}}) == {"type": "object", "properties": {"a": {}}}
    assert output_schema(None) is None and output_schema({}) is None and output_schema([]) is None
    with pytest.raises(ValueError, match=r"outputs\[1\]: must be an object with a name"):
        output_schema([{"name": "ok"}, "count"])


def test_a_mismatch_names_each_place_and_what_the_schema_wants_never_the_value() -> None:
    contract = output_contract(plan_with({**COUNTED, "required": ["count", "label"], "additionalProperties": False}))
    assert contract is not None
    assert contract.mismatch({"count": 3, "label": "x"}) is None
    mismatch = contract.mismatch({"count": "HUSH-42", "extra": "HUSH-43"})
    assert isinstance(mismatch, OutputMismatch) and mismatch.kind == "output_mismatch"
    assert mismatch.problems == [
        "output.count: must be of type integer, not string",
        "output.label: required",
        "output: unexpected property extra",
    ]
    assert "HUSH" not in str(mismatch)
    nested = output_contract(
        plan_with({"type": "array", "items": {"type": "object", "properties": {"n": {"minimum": 1}}}})
    )
    assert nested is not None and nested.mismatch([{"n": 1}, {"n": 0}]).problems == ["output[1].n: must be >= 1"]  # type: ignore[union-attr]


def test_text_output_does_not_satisfy_an_object_schema() -> None:
    for outputs in (COUNTED, {"properties": {"count": {"type": "integer"}}}, [{"name": "count"}]):
        contract = output_contract(plan_with(outputs))
        assert contract is not None
        mismatch = contract.mismatch("3 things")
        assert mismatch is not None
        assert mismatch.problems == [
            "output: must be of type object, not string (the tool's output was text, not JSON)"
        ]


@pytest.mark.parametrize(
    ("outputs", "words"),
    [
        ({"type": "nope"}, "outputs: not a usable JSON Schema"),
        ({"$ref": "https://example.com/schema.json"}, "may not fetch https://example.com/schema.json"),
        ({"properties": {"s": {"pattern": "("}}}, "outputs: not a usable JSON Schema"),
        ([{"type": "string"}], "outputs[0]: must be an object with a name"),
        ("text", "outputs: must be a JSON Schema"),
    ],
)
def test_outputs_that_are_no_schema_are_a_config_error_naming_outputs(outputs: Any, words: str) -> None:
    with pytest.raises(ConfigError) as raised:
        output_contract(plan_with(outputs))
    assert raised.value.message.startswith("t: ") and words in raised.value.message


def test_the_pure_python_jsonschema_never_loads() -> None:
    """Its patterns would run on Python's backtracking re: jsonschema-rs describes mismatches too."""
    code = (
        "import sys\n"
        "from runner.core.outputs import output_contract\n"
        "from runner.core.plan import Plan\n"
        "plan = Plan.from_json({'tool_id': 't', 'version': '1', 'tool_type': 'script', 'content_hash': '0',"
        " 'outputs': {'type': 'object'}})\n"
        "c = output_contract(plan)\n"
        "assert c.mismatch({}) is None\n"
        "print('jsonschema' in sys.modules)\n"
        "c.mismatch('x')\n"
        "print('jsonschema' in sys.modules)\n"
    )
    done = subprocess.run([sys.executable, "-c", code], cwd=ROOT, capture_output=True, text=True, check=True)
    assert done.stdout.split() == ["False", "False"]


# --- runs ------------------------------------------------------------------------------------


async def test_a_mismatching_output_is_an_error_run_whose_record_names_the_path(
    runner: Runner, publish_tool: Callable[..., str], conn: psycopg.Connection
) -> None:
    tool = script(publish_tool, """echo '{"count": "HUSH-7", "label": "a"}'\n""", COUNTED)
    result = await runner.run(tool)
    assert result.status == "error" and isinstance(result.failure, OutputMismatch)
    assert result.exit_code == 0, "the tool itself succeeded"
    assert "output.count: must be of type integer, not string" in (result.error or "")
    assert result.output == {"count": "HUSH-7", "label": "a"}, "the output is kept for debugging"
    status, summary = await record(runner, conn, result.run_id)
    assert status == "error" and summary is not None and "output.count: must be of type integer" in summary
    assert "HUSH-7" not in summary, "run records hold no outputs"


async def test_a_matching_output_succeeds_and_says_what_it_was_held_to(
    runner: Runner, publish_tool: Callable[..., str], conn: psycopg.Connection
) -> None:
    tool = script(publish_tool, """echo '{"count": 3, "label": "a"}'\n""", COUNTED)
    result = await runner.run(tool)
    assert result.status == "success" and result.output == {"count": 3, "label": "a"}, result.error
    assert result.output_schema == COUNTED
    assert await record(runner, conn, result.run_id) == ("success", None)


async def test_text_output_of_a_tool_declaring_an_object_is_a_mismatch(
    runner: Runner, publish_tool: Callable[..., str]
) -> None:
    tool = script(publish_tool, "echo three things\n", COUNTED)
    result = await runner.run(tool)
    assert result.status == "error" and result.output == "three things"
    assert "output: must be of type object, not string (the tool's output was text, not JSON)" in (result.error or "")


def test_unusable_outputs_are_refused_at_publish_and_by_the_runner(
    publish_tool: Callable[..., str], tmp_path: Path
) -> None:
    """Publish refuses an outputs schema the runner cannot use; a row that holds one anyway
    (published before publish checked) still stops the run before the tool runs."""
    marker = tmp_path / "ran"
    with pytest.raises(Exception, match="outputs"):
        script(publish_tool, f"touch {marker}\necho '{{}}'\n", {"type": "nope"})
    with pytest.raises(ConfigError, match=r"t: outputs: not a usable JSON Schema"):
        output_contract(plan_with({"type": "nope"}))
    assert not marker.exists()


async def test_a_failed_run_is_not_held_to_its_outputs_and_no_outputs_means_no_check(
    runner: Runner, publish_tool: Callable[..., str]
) -> None:
    failing = await runner.run(script(publish_tool, "echo not json\nexit 3\n", COUNTED))
    assert failing.status == "error" and failing.exit_code == 3 and failing.failure is None
    free = await runner.run(script(publish_tool, "echo anything\n", None))
    assert free.status == "success" and free.output == "anything" and free.output_schema is None


def test_kiwi_run_of_a_mismatch_exits_1_with_the_output_and_the_path(
    database_url: str, tmp_path: Path, publish_tool: Callable[..., str]
) -> None:
    tool = script(publish_tool, """echo '{"count": 1.5}'\n""", COUNTED)
    done = run_kiwi(["run", tool, "--json"], cwd=tmp_path, env=kiwi_env(database_url, tmp_path / "cache"))
    assert done.code == 1, done.err
    result = done.json()
    assert result["status"] == "error" and result["output"] == {"count": 1.5}
    assert "output.count: must be of type integer, not number" in result["error"]
    assert "Traceback" not in done.err
    plain = run_kiwi(["run", tool], cwd=tmp_path, env=kiwi_env(database_url, tmp_path / "cache"))
    assert plain.code == 1 and json.loads(plain.out) == {"count": 1.5} and "output.count" in plain.err


JSON = st.recursive(
    st.none() | st.booleans() | st.integers() | st.floats(allow_nan=False, allow_infinity=False) | st.text(max_size=8),
    lambda inner: st.lists(inner, max_size=3) | st.dictionaries(st.text(max_size=8), inner, max_size=3),
    max_leaves=12,
)
KEYWORDS = st.sampled_from(
    ["type", "properties", "required", "items", "enum", "const", "minimum", "pattern", "$ref", "anyOf", "format"]
)
SCHEMAS = st.recursive(
    JSON,
    lambda inner: (
        st.dictionaries(KEYWORDS | st.text(max_size=6), inner, max_size=4)
        | st.lists(st.dictionaries(st.sampled_from(["name", "type", "required"]), inner, max_size=3), max_size=3)
    ),
    max_leaves=16,
)


@settings(max_examples=300, deadline=None)
@given(outputs=SCHEMAS, output=JSON)
def test_any_declared_outputs_and_any_output_end_in_a_verdict_never_a_traceback(outputs: Any, output: Any) -> None:
    """Whatever the registry stores as outputs (any JSON) and whatever a tool returns: a
    contract or a ConfigError naming outputs, then a pass or a mismatch naming places."""
    try:
        contract = output_contract(plan_with(outputs))
    except ConfigError as e:
        assert "outputs" in e.message
        return
    if contract is None:
        return
    mismatch = contract.mismatch(output)
    assert mismatch is None or (mismatch.problems and all(p.startswith("output") for p in mismatch.problems))
