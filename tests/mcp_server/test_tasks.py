"""MCP tasks without a worker: how a queued run reads as a task (status, message, times, ttl,
cursor, result), and the protocol errors the specification names, from Kiwi's real server in
memory on the real database, with the official SDK client on 2025-11-25 (the handshake)."""

from __future__ import annotations

import uuid
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import Any

import psycopg
import pytest
from mcp import Client
from mcp.shared.exceptions import MCPError
from mcp_types import INVALID_PARAMS, METHOD_NOT_FOUND, CallToolRequest, CallToolRequestParams, CallToolResult
from mcp_types import TaskMetadata as Ttl

from runner import Denied, Runner, Settings, build_server, from_claims
from runner.fleet import task_status, task_status_of
from runner.fleet.answers import failure_of, result_of
from runner.mcp_server.task_view import decode_cursor, encode_cursor, task_answer, task_of
from tests.mcp_server.task_fleet import cancel_task, create_task, get_task, list_tasks, task_result

RELATED = "io.modelcontextprotocol/related-task"
HELLO = {"action": "run", "item_id": "hello_world", "parameters": {"name": "Ada"}}


# -- a queued run as a task ----------------------------------------------------------------------


@pytest.mark.parametrize(
    ("status", "task"),
    [
        ("queued", "working"),
        ("running", "working"),
        ("retrying", "working"),
        ("waiting_approval", "input_required"),
        ("success", "completed"),
        ("error", "failed"),  # a tool call whose result has isError fails its task (the specification)
        ("timeout", "failed"),
        ("dead", "failed"),
        ("cancelled", "cancelled"),
    ],
)
def test_each_run_status_is_a_task_status(status: str, task: str) -> None:
    assert task_status(status) == task
    assert task_status_of({"status": status, "cancel_requested": False}) == task


def test_a_task_once_cancelled_stays_cancelled_whatever_its_run_did() -> None:
    for status in ("running", "success", "error"):
        assert task_status_of({"status": status, "cancel_requested": True}) == "cancelled"


def run(**fields: Any) -> dict[str, Any]:
    return {
        "id": str(uuid.uuid4()),
        "tool_id": "deploy",
        "status": "running",
        "queued_at": "2026-01-02T10:00:00+00:00",
        "started_at": "2026-01-02T10:00:01+00:00",
        "finished_at": None,
        "keep_until": "2026-01-02T11:00:00+00:00",
        "cancel_requested": False,
        "error": None,
        "result": None,
        "last_event": {"id": 3, "at": "2026-01-02T10:00:05.5+00:00", "kind": "log", "message": "50% done"},
        **fields,
    }


def test_a_task_is_its_run_read_as_the_specification_names_it() -> None:
    running = run()
    task = task_of(running)
    assert task.task_id == running["id"] and task.status == "working"
    assert task.created_at == "2026-01-02T10:00:00+00:00"
    assert task.last_updated_at == "2026-01-02T10:00:05.500000+00:00"  # its latest event
    assert task.ttl == 3_600_000  # kept an hour from its creation
    assert task.poll_interval == 1000
    assert task.status_message == "50% done"  # what it said last


def test_the_status_message_says_what_the_reader_needs() -> None:
    waiting = task_of(run(status="waiting_approval", approval_id="a1b2"))
    assert waiting.status == "input_required"
    assert "kiwi approve a1b2" in (waiting.status_message or "") and "by itself" in (waiting.status_message or "")
    assert (waiting.poll_interval or 0) > 1000
    queued = task_of(run(status="queued", started_at=None, last_event=None))
    assert "waits for a worker" in (queued.status_message or "")
    failed = task_of(run(status="error", error="exit code 3", finished_at="2026-01-02T10:00:09+00:00"))
    assert failed.status == "failed" and failed.status_message == "exit code 3"
    assert failed.last_updated_at == "2026-01-02T10:00:09+00:00"
    stopping = task_of(run(cancel_requested=True))
    assert stopping.status == "cancelled" and "stopping" in (stopping.status_message or "")


def test_a_cursor_round_trips_and_a_foreign_one_is_invalid_params() -> None:
    page_end = run()
    assert decode_cursor(encode_cursor(page_end)) == page_end["queued_at"]
    assert decode_cursor(None) is None
    for bad in ("not-a-cursor", "e30", encode_cursor({"queued_at": "yesterday"})):
        with pytest.raises(MCPError) as refused:
            decode_cursor(bad)
        assert refused.value.code == INVALID_PARAMS


def kept(**answer: Any) -> dict[str, Any]:
    """A run that ended with the result its worker kept (runner/fleet/worker.py _answer)."""
    base = {"tool_id": "deploy", "version": "1.0.0", "status": "success", "output": {"ok": True}, "error": None}
    return run(status=answer.get("status", "success"), result={**base, **answer})


def test_a_kept_result_answers_as_the_direct_call_would() -> None:
    done = kept(executor_chain=["deploy", "bash_runtime", "subprocess"], duration_ms=12.5, warnings=["old"])
    answer = task_answer(done)
    assert not answer.is_error and answer.structured_content is not None
    assert answer.structured_content["output"] == {"ok": True}
    assert answer.structured_content["warnings"] == ["old"]
    assert "success: deploy@1.0.0 via deploy -> bash_runtime -> subprocess" in answer.content[0].text  # type: ignore[union-attr]
    assert answer.meta == {RELATED: {"taskId": done["id"]}}


def test_a_kept_failure_keeps_its_kind_and_hint() -> None:
    bad = kept(
        status="error",
        output=None,
        error="invalid parameters for deploy",
        failure={"kind": "invalid_parameters", "message": "invalid parameters for deploy", "hint": "x"},
    )
    answer = task_answer(bad)
    assert answer.is_error and answer.structured_content is not None
    assert answer.structured_content["failure"]["kind"] == "invalid_parameters"
    assert "load(item_id='deploy')" in answer.structured_content["hint"]  # the hint of a direct call


def test_a_gate_refusal_comes_back_as_the_same_refusal() -> None:
    refusal = {"kind": "rate_limited", "message": "limit reached", "hint": "wait", "retry_after_s": 30}
    failure = failure_of(refusal)
    assert isinstance(failure, Denied) and failure.kind == "rate_limited" and failure.extra == {"retry_after_s": 30}
    answer = task_answer(kept(status="error", output=None, error="limit reached", failure=refusal))
    assert answer.is_error and answer.structured_content is not None
    assert answer.structured_content["error"]["kind"] == "rate_limited"
    assert answer.structured_content["retry_after_s"] == 30


def test_a_run_without_a_kept_result_answers_with_why() -> None:
    denied = task_answer(run(status="error", approval_id="a1", error="denied by alice: no"))
    assert denied.is_error and denied.structured_content is not None
    assert denied.structured_content["error"]["kind"] == "approval_refused"
    assert "denied by alice: no" in denied.content[0].text  # type: ignore[union-attr]
    cancelled = task_answer(run(status="cancelled", error="cancelled before it ran"))
    assert cancelled.is_error and cancelled.structured_content is not None
    assert cancelled.structured_content["error"]["kind"] == "cancelled"
    assert result_of(run(result={"status": "error", "error": "x"})) is None
    assert cancelled.meta == {RELATED: {"taskId": cancelled.structured_content["task"]["taskId"]}}


# -- the server's answers and errors -------------------------------------------------------------


@pytest.fixture
def stranger(make_runner: Callable[..., Runner], make_settings: Callable[..., Settings], tmp_path: Path) -> Runner:
    """A runner acting as a signed-in user of its own, with no task of the local owner's."""
    who = from_claims({"sub": str(uuid.uuid4()), "role": "authenticated", "aud": "authenticated"})
    return make_runner(make_settings(cache_dir=tmp_path / "stranger"), principal=who)


@pytest.fixture
def cancel_after(conn: psycopg.Connection) -> Iterator[list[str]]:
    """Tasks left queued by a test, cancelled afterwards (no worker runs them later)."""
    made: list[str] = []
    yield made
    for task_id in made:
        conn.execute("select cancel_queued_run(%s)", (task_id,))


async def test_the_capability_is_declared_and_execute_may_run_as_a_task(runner: Runner) -> None:
    async with Client(build_server(runner), mode="legacy") as client:
        tasks = client.server_capabilities.tasks
        assert tasks is not None and tasks.list is not None and tasks.cancel is not None
        assert tasks.requests is not None and tasks.requests.tools is not None and tasks.requests.tools.call is not None
        listed = {t.name: t.execution for t in (await client.list_tools()).tools}
    assert listed["execute"] is not None and listed["execute"].task_support == "optional"
    assert listed["search"] is None and listed["load"] is None and listed["help"] is None


async def test_a_task_is_answered_at_once_queued_in_the_mcp_session_and_cancelled(
    runner: Runner, conn: psycopg.Connection, cancel_after: list[str]
) -> None:
    server = build_server(runner)
    async with Client(server, mode="legacy") as client:
        created = await create_task(client, HELLO, ttl_ms=10)  # below the least a task is kept: a minute
        task_id = created.task.task_id
        cancel_after.append(task_id)
        assert created.task.status == "working" and created.task.ttl == 60_000
        assert "runs as task" in str(created.meta)
        row = conn.execute("select status, version, session_id from queued_runs where id = %s", (task_id,)).fetchone()
        assert row is not None and row[0] == "queued" and row[1] == "1.0.0"  # the version it was checked at
        assert row[2].startswith("mcp-")  # the server's session: stdio and memory have one client
        cancelled = await cancel_task(client, task_id)
        assert cancelled.status == "cancelled" and cancelled.status_message == "cancelled before it ran"
        answer = await task_result(client, task_id)  # terminal: answered at once
        assert answer.is_error and answer.meta == {RELATED: {"taskId": task_id}}
        with pytest.raises(MCPError) as again:
            await cancel_task(client, task_id)
        assert again.value.code == INVALID_PARAMS and "already cancelled" in again.value.message


async def test_unknown_and_malformed_task_ids_are_invalid_params(runner: Runner) -> None:
    async with Client(build_server(runner), mode="legacy") as client:
        for task_id in (str(uuid.uuid4()), "not-a-task", "x" * 500):
            for ask in (get_task, task_result, cancel_task):
                with pytest.raises(MCPError) as refused:
                    await ask(client, task_id)
                assert refused.value.code == INVALID_PARAMS, (ask, task_id)
                assert refused.value.message.startswith("Failed to"), refused.value.message
        with pytest.raises(MCPError) as bad_cursor:
            await list_tasks(client, "made-up")
        assert bad_cursor.value.code == INVALID_PARAMS


async def test_another_users_task_is_not_found_and_not_listed(
    runner: Runner, stranger: Runner, cancel_after: list[str]
) -> None:
    async with Client(build_server(runner), mode="legacy") as owner:
        task_id = (await create_task(owner, HELLO)).task.task_id
        cancel_after.append(task_id)
        assert task_id in [t.task_id for t in (await list_tasks(owner)).tasks]
    async with Client(build_server(stranger), mode="legacy") as other:
        for ask in (get_task, task_result, cancel_task):
            with pytest.raises(MCPError) as refused:
                await ask(other, task_id)
            assert refused.value.code == INVALID_PARAMS and "not found" in refused.value.message
        assert (await list_tasks(other)).tasks == []  # row-level security: a user of its own has none


async def test_what_cannot_be_a_task_is_refused_before_anything_is_queued(
    runner: Runner, conn: psycopg.Connection
) -> None:
    def queued() -> int:
        row = conn.execute("select count(*) from queued_runs").fetchone()
        return int(row[0]) if row else 0

    before = queued()
    async with Client(build_server(runner), mode="legacy") as client:
        with pytest.raises(MCPError) as not_a_task_tool:
            await create_task(client, {"query": "hello"}, name="search")
        assert not_a_task_tool.value.code == METHOD_NOT_FOUND  # taskSupport forbidden
        with pytest.raises(MCPError) as not_run:
            await create_task(client, {"action": "delete", "item_id": "hello_world"})
        assert not_run.value.code == INVALID_PARAMS and "action=run" in not_run.value.message
        with pytest.raises(MCPError) as unknown:
            await create_task(client, {"action": "run", "item_id": f"no_such_{uuid.uuid4().hex[:8]}"})
        assert unknown.value.code == INVALID_PARAMS and "not found" in unknown.value.message
        with pytest.raises(MCPError) as bad:
            await create_task(client, {"action": "run", "item_id": "hello_world", "parameters": {"name": 3}})
        assert bad.value.code == INVALID_PARAMS and bad.value.data["error"]["kind"] == "invalid_parameters"
    assert queued() == before
    await runner.flush_records()
    refused = conn.execute(
        "select decision from audit_log where tool_id = 'hello_world' and session_id like 'mcp-%%' "
        "and reason like 'invalid parameters%%' order by at desc limit 1"
    ).fetchone()
    assert refused is not None and refused[0] == "refused"  # audited, as a direct call's refusal is


async def test_a_client_of_another_protocol_version_gets_a_plain_answer(runner: Runner) -> None:
    """The `task` field is 2025-11-25's: on 2026-07-28 it is ignored, and a client that does not
    declare the tasks extension (test_tasks_extension.py) gets the answer itself."""
    async with Client(build_server(runner), mode="2026-07-28") as client:
        assert client.server_capabilities.tasks is None
        params = CallToolRequestParams(name="execute", arguments=HELLO, task=Ttl(ttl=60_000))
        answer = await client.session.send_request(CallToolRequest(params=params), CallToolResult)
    assert not answer.is_error and answer.structured_content is not None
    assert answer.structured_content["output"] == {"greeting": "Hello, Ada!"}


async def test_tasks_list_pages_with_a_cursor(stranger: Runner, cancel_after: list[str]) -> None:
    async with Client(build_server(stranger), mode="legacy") as client:
        made = []
        for _ in range(51):
            made.append((await create_task(client, HELLO)).task.task_id)
        cancel_after.extend(made)
        first = await list_tasks(client)
        assert len(first.tasks) == 50 and first.next_cursor is not None
        rest = await list_tasks(client, first.next_cursor)
        assert rest.next_cursor is None
        assert [t.task_id for t in first.tasks + rest.tasks] == made[::-1]  # newest first, each once
