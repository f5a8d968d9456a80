"""record_runs takes exactly the records run_records_problems finds nothing wrong with.

record_runs writes a batch without first working out every record's problems: it reads
each record into typed columns, screens it for what the casts and the table's
constraints would not refuse, and asks run_records_problems why only when a batch is
refused (schema file 210_run_records.sql). Two encodings of one set of rules can drift, so
Hypothesis throws near-valid records at both and holds them to the same verdict:
accepted exactly when there are no problems (and the run does not finish before it
starts), and refused with the problems' own words otherwise. Each example runs in a
transaction that is rolled back.
"""

from __future__ import annotations

import json
import uuid
from collections.abc import Iterator
from typing import Any

import psycopg
import pytest
from hypothesis import HealthCheck, event, given, settings
from hypothesis import strategies as st

ABSENT = object()  # the field is left out of the record

UUID = "0f8fad5b-d9cb-469f-a165-70867728950e"
HASH = "ab" * 32
TIMES = [
    "2026-01-01T00:00:00Z",
    "2026-01-01T00:00:01.5+02:00",
    "2026-01-01 00:00:02",
    "infinity",
    "-infinity",
    "last tuesday",
    "2026-02-30T00:00:00Z",
    "",
    5,
    None,
]
FIELDS: dict[str, list[Any]] = {
    "id": [
        UUID,
        UUID.upper(),
        UUID.replace("-", ""),
        "{" + UUID + "}",
        "0f8fad5bd-9cb-469f-a165-70867728950e",
        "0f8f-ad5b-d9cb-469f-a165-7086-7728-950e",
        "not-a-uuid",
        "",
        123,
        None,
    ],
    "tool_id": [
        "runs_fuzz/x",
        "public/runs_fuzz",
        "",
        "   ",
        "public/",
        "a" * 300,
        "a" * 301,
        "public/" + "a" * 300,
        "runs_fuzz/a\x01b",
        "runs_fuzz/a\tb",
        "é" * 300,
        5,
        [],
        None,
    ],
    "status": ["success", "error", "timeout", "crashed", "", 1, None],
    "version": ["1.0.0", "v" * 128, "v" * 129, 1, [], None],
    "content_hash": [HASH, HASH.upper(), HASH[:-1], "g" * 64, HASH + "a", 5, None],
    "params_sha256": [HASH, "0" * 64, HASH[1:], "é" * 64, False, None],
    "exit_code": [0, -1, 1.5, 1.0, 1e2, 2**31 - 1, 2**31, -(2**31), -(2**31) - 1, 2**70, "1", True, None],
    "duration_ms": [0, 0.5, -1, -0.0, 1e15, 1e16, 2**70, "1", True, None],
    "params_size": [0, 17, -1, 1.5, 2.0, 2**31 - 1, 2**31, "17", None],
    "error_summary": ["boom", "x" * 2001, 1, {}, None],
    "primitive": ["subprocess", "p" * 300, "p" * 301, 1, None],
    "executor_chain": [
        [],
        ["a", "b"],
        [1],
        [None],
        [["a"]],
        ["a" * 300],
        ["a" * 301],
        ["a"] * 64,
        ["a"] * 65,
        "a -> b",
        {},
        None,
    ],
    "warnings": [
        [],
        ["deprecated: use v2"],
        [1],
        [None],
        [["a"]],
        ["w" * 1000],
        ["w" * 1001],
        ["w"] * 16,
        ["w"] * 17,
        "deprecated",
        {},
        None,
    ],
    "sandbox": [
        {},
        {"network": "none", "filesystem": {"read": ["/work"]}},
        {"p": "x" * (4096 - 9)},  # 4096 bytes as the database writes it: {"p": "xx..."}
        {"p": "x" * (4097 - 9)},
        {"p": "é" * 2044},  # 2044 characters, 4097 bytes
        [],
        [{"network": "none"}],
        "none",
        1,
        None,
    ],
    "payload": [
        {},
        {"params": {"name": "x"}, "output": "hi", "stderr": "", "truncated": []},
        {"p": "x" * (65536 - 9)},  # 65536 bytes as the database writes it
        {"p": "x" * (65537 - 9)},
        {"p": "é" * 32764},  # 32764 characters, 65537 bytes
        [],
        "output",
        1,
        None,
    ],
    "trace_id": [
        "4bf92f3577b34da6a3ce929d0e0e4736",
        "4BF92F3577B34DA6A3CE929D0E0E4736",
        "4bf92f3577b34da6a3ce929d0e0e473",
        "4bf92f3577b34da6a3ce929d0e0e47360",
        "0" * 32,
        "4bf92f3577b34da6a3ce929d0e0e473g",
        "",
        1,
        [],
        None,
    ],
    "started_at": TIMES,
    "finished_at": TIMES,
}
VALID = {
    "id": UUID,
    "tool_id": "runs_fuzz/x",
    "status": "success",
    "version": "1.0.0",
    "content_hash": HASH,
    "params_sha256": HASH,
    "exit_code": 0,
    "duration_ms": 12.5,
    "params_size": 17,
    "executor_chain": ["runs_fuzz/x", "subprocess"],
    "primitive": "subprocess",
    "started_at": "2026-01-01T00:00:00Z",
}

changes = st.dictionaries(
    st.sampled_from(sorted(FIELDS)),
    st.none(),  # replaced below by a value of that field
    max_size=3,
).flatmap(
    lambda picked: st.fixed_dictionaries(
        {name: st.sampled_from([*FIELDS[name], ABSENT]) for name in picked},
    )
)
extras = st.dictionaries(st.sampled_from(["output", "caller", "Status", "", "id "]), st.just("x"), max_size=1)
not_objects = st.sampled_from([[], "run", 1, None, [VALID]])


def record_of(change: dict[str, Any], extra: dict[str, Any]) -> dict[str, Any]:
    record = {**VALID, **extra}
    for name, value in change.items():
        if value is ABSENT:
            record.pop(name, None)
        else:
            record[name] = value
    if record.get("id") == UUID:  # a fresh id, so that accepted records never collide
        record["id"] = str(uuid.uuid4())
    return record


@pytest.fixture(scope="module")
def conn(database_url: str) -> Iterator[psycopg.Connection]:
    with psycopg.connect(database_url) as c:
        yield c


def verdicts(conn: psycopg.Connection, batch: list[Any]) -> tuple[list[str] | None, list[list[str]]]:
    """(the refusal's message or None when written, every record's problems), rolled back."""
    text = json.dumps(batch)
    with conn.transaction(force_rollback=True):
        query = "select problems from kiwi_internal.run_records_problems(%s::jsonb) order by n"
        problems = [row[0] for row in conn.execute(query, (text,))]
        try:
            with conn.transaction():
                conn.execute("select * from public.record_runs(%s::jsonb)", (text,)).fetchall()
            refusal = None
        except psycopg.Error as e:
            refusal = [e.sqlstate or "", e.diag.message_primary or ""]
    return refusal, problems


@settings(max_examples=400, deadline=None, suppress_health_check=[HealthCheck.function_scoped_fixture])
@given(change=changes, extra=extras)
def test_a_record_is_written_exactly_when_it_has_no_problems(
    change: dict[str, Any], extra: dict[str, Any], conn: psycopg.Connection
) -> None:
    record = record_of(change, extra)
    refusal, (problems,) = verdicts(conn, [record])
    if refusal is None:
        event("written")
        assert problems == [], f"written although it has problems: {problems}\n{record}"
        return
    state, message = refusal
    assert message.startswith("invalid run record: "), message
    if problems:
        event("refused: problems")
        assert state == "22023", (state, message)
        assert message == "invalid run record: " + "; ".join(problems), (message, problems)
    else:
        event("refused: finishes before it starts")
        assert state == "22023" and "is before started_at" in message, (state, message, record)


@settings(max_examples=60, deadline=None, suppress_health_check=[HealthCheck.function_scoped_fixture])
@given(changes_=st.lists(st.tuples(changes, extras), min_size=2, max_size=4), odd=st.none() | not_objects)
def test_a_batch_is_written_whole_or_refused_by_its_first_bad_record(
    changes_: list[tuple[dict[str, Any], dict[str, Any]]], odd: Any, conn: psycopg.Connection
) -> None:
    batch: list[Any] = [record_of(c, e) for c, e in changes_]
    if odd is not None:
        batch.insert(1, odd)
    refusal, problems = verdicts(conn, batch)
    first_bad = next((p for p in problems if p), None)
    if refusal is None:
        assert first_bad is None, (first_bad, batch)
        return
    if refusal[0] == "23505":  # two records of the batch named the same run id
        ids = [uuid.UUID(r["id"].strip("{}")) for r in batch if isinstance(r, dict) and isinstance(r.get("id"), str)]
        assert first_bad is None and len(ids) > len(set(ids)), (refusal, batch)
        return
    if first_bad is not None:
        assert refusal[1] == "invalid run record: " + "; ".join(first_bad), (refusal, problems)
    else:
        assert "is before started_at" in refusal[1], refusal


def test_a_duration_that_would_start_the_run_before_time_began_is_refused_by_name(conn: psycopg.Connection) -> None:
    """Regression (found by the property above): 1e15 ms and no started_at made the database
    compute a start out of timestamptz's range, a 22008 instead of a refusal naming the field."""
    record = {**VALID, "duration_ms": 1e15}
    record.pop("started_at", None)
    refusal, (problems,) = verdicts(conn, [record])
    assert refusal is not None and refusal[0] == "22023", refusal
    assert problems == ["duration_ms: must be a number of milliseconds from 0 to 1e12 (about 31 years)"]
