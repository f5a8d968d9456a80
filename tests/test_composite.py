"""A composite tool runs its declared steps through the gate, through `kiwi` as a process.

Published with `kiwi publish` on the seeded composite_runtime, a composite's steps each call
another tool as the caller: each step has its own audit row (in the composite's session),
each step's output reaches the next as data (an integer stays an integer), a step the gate
holds for approval stops the composite there, naming the step, and a composite that calls
itself is stopped.
"""

from __future__ import annotations

import uuid
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import Any

import psycopg
import pytest
import yaml

from tests.kiwi_cli import Done, kiwi_env, run_kiwi

pytestmark = pytest.mark.slow

COUNT = """set -eu
n=$(printf '%s' "$KIWI_PARAM_TEXT" | wc -w)
printf '{"words": %d}\\n' "$n"
"""
# reads its parameters as JSON on stdin: `count` must arrive as a number, not as text
DOUBLE = """set -eu
python3 -c 'import json, sys; n = json.load(sys.stdin)["count"]; print(json.dumps({"double": n * 2}))'
"""


@pytest.fixture
def names(conn: psycopg.Connection) -> Iterator[dict[str, str]]:
    suffix = uuid.uuid4().hex[:6]
    made = {k: f"local/{k}_{suffix}" for k in ("count", "double", "pipe", "loop")}
    yield made
    conn.execute("delete from approval_policies where pattern = any (%s)", (list(made.values()),))
    conn.execute("delete from approvals where tool_id = any (%s)", (list(made.values()),))  # a held step's
    for ref in ("pipe", "loop", "double", "count"):
        conn.execute("delete from tools where ref = %s", (made[ref],))


@pytest.fixture
def kiwi(database_url: str, tmp_path: Path) -> Callable[..., Done]:
    def run(*args: str) -> Done:
        return run_kiwi(args, cwd=tmp_path, env=kiwi_env(database_url, tmp_path / "cache"), timeout=120)

    return run


def publish(kiwi: Callable[..., Done], root: Path, manifest: dict[str, Any], files: dict[str, str]) -> None:
    folder = root / manifest["tool_id"].split("/")[1]
    folder.mkdir()
    (folder / "tool.yaml").write_text(yaml.safe_dump({"version": "1.0.0", **manifest}))
    for name, text in files.items():
        (folder / name).write_text(text)
    done = kiwi("publish", str(folder))
    assert done.code == 0, done


def script(ref: str, entry: str, params: list[dict[str, Any]]) -> dict[str, Any]:
    return {
        "tool_id": ref,
        "tool_type": "script",
        "executor": "bash_runtime",
        "entrypoint": entry,
        "parameters": params,
    }


@pytest.fixture
def pipe(kiwi: Callable[..., Done], names: dict[str, str], tmp_path: Path) -> str:
    publish(
        kiwi, tmp_path, script(names["count"], "count.sh", [{"name": "text", "type": "string"}]), {"count.sh": COUNT}
    )
    publish(
        kiwi,
        tmp_path,
        script(names["double"], "double.sh", [{"name": "count", "type": "integer"}]),
        {"double.sh": DOUBLE},
    )
    composite = {
        "tool_id": names["pipe"],
        "tool_type": "composite",
        "executor": "composite_runtime",
        "description": "Counts a text's words, then doubles the count.",
        "parameters": [{"name": "text", "type": "string", "required": True}],
        "config": {
            "steps": [
                {"id": "count", "tool": names["count"], "params": {"text": "{params.text}"}},
                {"id": "double", "tool": names["double"], "params": {"count": "{steps.count.output.words}"}},
            ],
            "output": {
                "words": "{steps.count.output.words}",
                "doubled": "{steps.double.output.double}",
                "said": "{params.text}: {steps.count.output.words} words",
            },
        },
    }
    publish(kiwi, tmp_path, composite, {})
    return names["pipe"]


def test_a_composite_runs_its_steps_as_the_caller_each_through_the_gate(
    kiwi: Callable[..., Done], pipe: str, names: dict[str, str], conn: psycopg.Connection
) -> None:
    done = kiwi("run", pipe, "-p", "text=one two three", "--json")
    assert done.code == 0, done
    answer = done.json()
    assert answer["output"] == {"words": 3, "doubled": 6, "said": "one two three: 3 words"}
    assert answer["executor_chain"] == [pipe, "composite_runtime", "subprocess"]

    rows = conn.execute(
        "select tool_id, decision, outcome, session_id, caller from audit_log where tool_id = any (%s) order by at",
        ([names["count"], names["double"], pipe],),
    ).fetchall()
    by_tool = {r[0]: r for r in rows}
    assert set(by_tool) == {pipe, names["count"], names["double"]}, rows
    step_sessions = {by_tool[names["count"]][3], by_tool[names["double"]][3]}
    assert len(step_sessions) == 1 and next(iter(step_sessions)).startswith("composite-"), rows
    assert {r[1:3] for r in rows} == {("allowed", "success")}
    assert len({r[4] for r in rows}) == 1, "every step audited as the composite's caller"
    typed = conn.execute(
        "select count(*) from tool_runs where tool_id = %s and status = 'success'", (names["double"],)
    ).fetchone()
    assert typed == (1,)


def test_a_step_the_gate_holds_stops_the_composite_there(
    kiwi: Callable[..., Done], pipe: str, names: dict[str, str], conn: psycopg.Connection
) -> None:
    conn.execute("insert into approval_policies (pattern, ttl_seconds) values (%s, 60)", (names["double"],))
    done = kiwi("run", pipe, "-p", "text=one two", "--json")
    assert done.code != 0, done
    answer = done.json()
    assert answer["status"] == "error"
    assert f"step double ({names['double']})" in answer["error"] and "approv" in answer["error"], answer["error"]
    assert [s["id"] for s in answer["output"]["steps"]] == ["count", "double"]
    assert answer["output"]["steps"][0]["output"] == {"words": 2}
    ran = conn.execute("select count(*) from tool_runs where tool_id = %s", (names["double"],)).fetchone()
    assert ran == (0,), "the held step did not run"
    pending = conn.execute(
        "select count(*) from approvals where tool_id = %s and status = 'pending'", (names["double"],)
    ).fetchone()
    assert pending == (1,)


def test_a_composite_that_calls_itself_is_stopped(
    kiwi: Callable[..., Done], names: dict[str, str], tmp_path: Path
) -> None:
    loop = {
        "tool_id": names["loop"],
        "tool_type": "composite",
        "executor": "composite_runtime",
        "config": {"steps": [{"tool": names["loop"]}]},
    }
    publish(kiwi, tmp_path, loop, {})
    done = kiwi("run", names["loop"], "--json")
    assert done.code != 0, done
    assert "composites nested 8 deep" in done.out, done.out
