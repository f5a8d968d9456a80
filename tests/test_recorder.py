"""Run records written behind the runs, in batches, and never dropped silently (runner/harness/recorder.py)."""

from __future__ import annotations

import asyncio
import uuid
from collections.abc import AsyncIterator
from pathlib import Path
from typing import Any

import psycopg
import pytest

from runner import PostgresRegistry, local_owner
from runner.harness.recorder import RunRecorder


@pytest.fixture
async def registry(database_url: str) -> AsyncIterator[PostgresRegistry]:
    reg = PostgresRegistry(database_url, principal=local_owner())
    yield reg
    await reg.aclose()


def forget(conn: psycopg.Connection, tool: str) -> None:
    """Delete the run records and audit rows a test wrote for `tool`."""
    conn.execute("delete from tool_runs where tool_id = %s", (tool,))
    conn.execute("delete from audit_log where tool_id = %s", (tool,))


def stored(conn: psycopg.Connection, ids: list[str]) -> int:
    return conn.execute("select count(*) from tool_runs where id = any(%s::uuid[])", (ids,)).fetchone()[0]


async def test_records_queued_by_concurrent_runs_are_all_written_under_their_ids(
    registry: PostgresRegistry, conn: psycopg.Connection
) -> None:
    recorder = RunRecorder(registry)
    tool = f"recorder_test_{uuid.uuid4().hex[:8]}"

    async def one(i: int) -> str:
        await asyncio.sleep(0)
        return recorder.submit({"tool_id": tool, "status": "success", "duration_ms": i})

    ids = await asyncio.gather(*(one(i) for i in range(300)))
    await recorder.flush()
    try:
        assert recorder.written == 300 and recorder.lost == 0
        assert stored(conn, ids) == 300, "every record is stored under the id submit returned"
        durations = [r[0] for r in conn.execute("select duration_ms from tool_runs where tool_id = %s", (tool,))]
        assert sorted(durations) == list(range(300))
    finally:
        conn.execute("delete from tool_runs where tool_id = %s", (tool,))


async def test_one_bad_record_loses_only_itself_and_is_reported(
    registry: PostgresRegistry, conn: psycopg.Connection
) -> None:
    reported: list[str] = []
    recorder = RunRecorder(registry, on_error=reported.append)
    tool = f"recorder_test_{uuid.uuid4().hex[:8]}"
    good = [recorder.submit({"tool_id": tool, "status": "success"}) for _ in range(3)]
    bad = recorder.submit({"tool_id": tool, "status": "finished"})
    good.append(recorder.submit({"tool_id": tool, "status": "error"}))
    await recorder.flush()
    try:
        assert stored(conn, good) == 4 and stored(conn, [bad]) == 0
        assert recorder.lost == 1 and len(reported) == 1 and "status" in reported[0]
    finally:
        conn.execute("delete from tool_runs where tool_id = %s", (tool,))


async def test_an_unreachable_registry_is_reported_not_raised() -> None:
    reported: list[str] = []
    registry = PostgresRegistry(
        "postgresql://postgres:postgres@127.0.0.1:1/none", principal=local_owner(), connect_timeout=1
    )
    recorder = RunRecorder(registry, on_error=reported.append)
    recorder.submit({"tool_id": "x", "status": "success"})
    await recorder.flush()
    await registry.aclose()
    assert recorder.lost == 1 and reported and "not saved" in reported[0]


async def test_a_record_queued_as_a_function_is_made_by_the_writer(
    registry: PostgresRegistry, conn: psycopg.Connection
) -> None:
    """Runner queues the function that makes a record, so that building it happens off the
    run's path; the id is known at once and the function runs only when the batch is written."""
    recorder = RunRecorder(registry)
    tool = f"recorder_test_{uuid.uuid4().hex[:8]}"
    made: list[int] = []

    def make(i: int) -> dict[str, object]:
        made.append(i)
        return {"tool_id": tool, "status": "success", "duration_ms": i}

    ids = [recorder.submit(lambda i=i: make(i)) for i in range(5)]
    assert made == [], "nothing is made while the runs go on"
    await recorder.flush()
    try:
        assert made == [0, 1, 2, 3, 4] and recorder.written == 5
        assert stored(conn, ids) == 5, "each record is stored under the id submit returned"
    finally:
        conn.execute("delete from tool_runs where tool_id = %s", (tool,))


async def test_a_record_that_cannot_be_made_is_reported_and_the_others_written(
    registry: PostgresRegistry, conn: psycopg.Connection
) -> None:
    reported: list[str] = []
    recorder = RunRecorder(registry, on_error=reported.append)
    tool = f"recorder_test_{uuid.uuid4().hex[:8]}"

    def broken() -> dict[str, object]:
        raise ValueError("no")

    good = recorder.submit(lambda: {"tool_id": tool, "status": "success"})
    lost = recorder.submit(broken)
    await recorder.flush()
    try:
        assert stored(conn, [good]) == 1 and stored(conn, [lost]) == 0
        assert recorder.lost == 1 and len(reported) == 1 and "could not be made" in reported[0]
    finally:
        conn.execute("delete from tool_runs where tool_id = %s", (tool,))


async def test_only_a_postgres_registry_keeps_a_journal(tmp_path: Path, database_url: str) -> None:
    """A journal keeps a record's role and claims, never its token. Postgres acts on claims, so
    its replayed records are written as their caller; the REST backend would need the token, and
    would write a replayed record as somebody else, so it keeps none (its records stay in memory)."""
    from runner import RestRegistry
    from runner.harness.journal import journal_for

    postgres = PostgresRegistry(database_url, principal=local_owner())
    rest = RestRegistry("http://127.0.0.1:9", "anon-key-for-a-test")
    try:
        assert journal_for(tmp_path, postgres.backend) is not None
        assert journal_for(tmp_path, rest.backend) is None
    finally:
        await postgres.aclose()
        await rest.aclose()


def test_record_ids_are_distinct_random_version_4_uuids_in_their_canonical_form() -> None:
    from runner.harness.recorder import RunIds

    new_id = RunIds()
    ids = [new_id() for _ in range(1000)]  # several 4 KiB blocks of randomness
    assert len(set(ids)) == len(ids)
    for made in ids:
        parsed = uuid.UUID(made)
        assert str(parsed) == made and parsed.version == 4 and parsed.variant == uuid.RFC_4122


def counted(registry: PostgresRegistry) -> list[str]:
    """The registry functions the backend is asked for, in order (the real calls still go through)."""
    sent: list[str] = []
    carry = registry.backend.call

    async def call(function: str, args: Any, **kw: Any) -> Any:
        sent.append(function)
        return await carry(function, args, **kw)

    registry.backend.call = call  # type: ignore[method-assign]
    return sent


def audit(tool: str, run_id: str | None = None, decision: str = "allowed") -> dict[str, Any]:
    return {"session_id": "recorder-test", "tool_id": tool, "decision": decision, "run_id": run_id}


async def test_runs_and_their_audit_rows_are_written_in_one_round_trip(
    registry: PostgresRegistry, conn: psycopg.Connection
) -> None:
    recorder = RunRecorder(registry)
    sent = counted(registry)
    tool = f"recorder_test_{uuid.uuid4().hex[:8]}"
    ids = [recorder.submit({"tool_id": tool, "status": "success"}) for _ in range(5)]
    for run_id in ids:
        recorder.submit_audit(audit(tool, run_id))
    await recorder.flush()
    try:
        assert sent == ["record_calls"], "one round trip for both kinds"
        assert stored(conn, ids) == 5 and recorder.written == 10 and recorder.lost == 0
        rows = conn.execute("select run_id::text from audit_log where tool_id = %s", (tool,)).fetchall()
        assert sorted(r[0] for r in rows) == sorted(ids)
    finally:
        forget(conn, tool)


async def test_a_bad_audit_row_beside_runs_loses_only_itself(
    registry: PostgresRegistry, conn: psycopg.Connection
) -> None:
    reported: list[str] = []
    recorder = RunRecorder(registry, on_error=reported.append)
    tool = f"recorder_test_{uuid.uuid4().hex[:8]}"
    ids = [recorder.submit({"tool_id": tool, "status": "success"}) for _ in range(3)]
    recorder.submit_audit(audit(tool, ids[0]))
    recorder.submit_audit(audit(tool, ids[1], decision="perhaps"))
    await recorder.flush()
    try:
        assert stored(conn, ids) == 3, "the runs are written although the combined batch was refused"
        count = conn.execute("select count(*) from audit_log where tool_id = %s", (tool,)).fetchone()[0]
        assert count == 1 and recorder.lost == 1 and len(reported) == 1 and "decision" in reported[0]
    finally:
        forget(conn, tool)


async def test_a_registry_without_record_calls_is_written_kind_by_kind(
    registry: PostgresRegistry, conn: psycopg.Connection
) -> None:
    """A database from before record_calls (the function is missing: 42883) still gets every record."""
    conn.execute("alter function public.record_calls(jsonb, jsonb) rename to record_calls_hidden")
    try:
        recorder = RunRecorder(registry)
        sent = counted(registry)
        tool = f"recorder_test_{uuid.uuid4().hex[:8]}"
        ids = [recorder.submit({"tool_id": tool, "status": "success"}) for _ in range(2)]
        recorder.submit_audit(audit(tool, ids[0]))
        await recorder.flush()
        ids.append(recorder.submit({"tool_id": tool, "status": "success"}))
        recorder.submit_audit(audit(tool, ids[2]))
        await recorder.flush()
        assert stored(conn, ids) == 3 and recorder.lost == 0
        assert sent == ["record_calls", "record_runs", "record_audits", "record_runs", "record_audits"]
    finally:
        conn.execute("alter function public.record_calls_hidden(jsonb, jsonb) rename to record_calls")
        forget(conn, tool)


async def test_journaled_records_are_sent_as_the_text_the_journal_holds(
    registry: PostgresRegistry, conn: psycopg.Connection, tmp_path: Path
) -> None:
    """With a journal, each record is encoded once: the batch sent is the journal's JSON of the
    very records queued (text beyond ASCII and what JSON only holds as its str() included), and
    the rows stored are those records."""
    import json

    from runner.harness.journal import journal_for
    from runner.registry.base import Rows

    reported: list[str] = []
    recorder = RunRecorder(registry, on_error=reported.append, journal=journal_for(tmp_path, registry.backend))
    sent: list[Any] = []
    carry = registry.backend.call

    async def call(function: str, args: Any, **kw: Any) -> Any:
        if function == "record_calls":
            sent.append(args)
        return await carry(function, args, **kw)

    registry.backend.call = call  # type: ignore[method-assign]
    tool = f"recorder_test_{uuid.uuid4().hex[:8]}"
    error = "naïve \u2028 ✓ " + str(tmp_path)
    ids = [recorder.submit({"tool_id": tool, "status": "error", "error_summary": error, "warnings": [tmp_path]})]
    recorder.submit_audit(audit(tool, ids[0]))
    await recorder.flush()
    try:
        (args,) = sent
        for rows in (args["p_runs"], args["p_audits"]):
            assert isinstance(rows, Rows) and rows.json is not None
            assert json.loads(rows.json) == json.loads(json.dumps(list(rows), default=str))
        assert json.loads(args["p_runs"].json)[0]["id"] == ids[0]
        assert reported == []
        row = conn.execute("select error_summary, warnings from tool_runs where id = %s", (ids[0],)).fetchone()
        assert row == (error, [str(tmp_path)])
        assert recorder.written == 2 and recorder.lost == 0
    finally:
        recorder.close()
        forget(conn, tool)


async def test_a_run_and_its_audit_row_share_one_journal_line_and_are_replayed_from_it(
    registry: PostgresRegistry, conn: psycopg.Connection, tmp_path: Path
) -> None:
    """One call, one journal line: the audit row rides with its run's record (one write, one
    MAC). A process that ended before writing them leaves that line, and the next recorder of
    the registry stores both records from it, under their ids, and empties the journal."""
    from runner.harness.journal import journal_for

    tool = f"recorder_test_{uuid.uuid4().hex[:8]}"
    journal = journal_for(tmp_path, registry.backend)
    assert journal is not None
    run_id, audit_id = str(uuid.uuid4()), str(uuid.uuid4())
    run = {"id": run_id, "tool_id": tool, "status": "success"}
    segment, texts = journal.append_texts(
        local_owner(), [(run_id, "run", run), (audit_id, "audit", {**audit(tool, run_id), "id": audit_id})]
    )
    assert segment is not None and all(texts)
    (path,) = journal.directory.glob("*.jsonl")
    assert len(path.read_bytes().splitlines()) == 1
    journal.close()  # its process ended before the writer ran: the segment stays, unlocked
    assert path.exists()

    reported: list[str] = []
    recorder = RunRecorder(registry, on_error=reported.append, journal=journal_for(tmp_path, registry.backend))
    try:
        await recorder.flush()
        assert (stored(conn, [run_id]), recorder.written, reported) == (1, 2, [])
        row = conn.execute("select run_id from audit_log where id = %s", (audit_id,)).fetchone()
        assert row is not None and str(row[0]) == run_id
        left = [p for p in journal.directory.glob("*.jsonl") if p.stat().st_size]
        assert not left, "the journal still holds what Postgres has"
    finally:
        recorder.close()
        forget(conn, tool)


async def test_a_record_submitted_with_its_audit_row_is_journaled_once(
    registry: PostgresRegistry, conn: psycopg.Connection, tmp_path: Path
) -> None:
    """submit(..., audit=...) puts both on disk in one line before it returns, under the ids
    the registry then stores them with."""
    import json

    from runner.harness.journal import journal_for

    tool = f"recorder_test_{uuid.uuid4().hex[:8]}"
    journal = journal_for(tmp_path, registry.backend)
    assert journal is not None
    recorder = RunRecorder(registry, journal=journal)
    try:
        run_id = recorder.submit({"tool_id": tool, "status": "success"}, audit=audit(tool))
        (path,) = journal.directory.glob("*.jsonl")
        (line,) = path.read_bytes().splitlines()
        head = json.loads(line.split(b" ", 1)[1])
        assert (head["id"], head["kind"], [t["kind"] for t in head["then"]]) == (run_id, "run", ["audit"])
        await recorder.flush()
        assert stored(conn, [run_id]) == 1
        found = conn.execute("select id from audit_log where tool_id = %s", (tool,)).fetchall()
        assert [str(r[0]) for r in found] == [head["then"][0]["id"]]
    finally:
        recorder.close()
        forget(conn, tool)
