"""MCP tasks on protocol 2026-07-28, the tasks extension (`io.modelcontextprotocol/tasks`),
without a worker: what the server declares, which calls it makes tasks of and for whom, what
tasks/get, tasks/update and tasks/cancel answer, and the errors the extension names; Kiwi's
real server in memory on the real database, the official SDK client speaking 2026-07-28 with
the extension declared (tests/mcp_server/task_extension.py)."""

from __future__ import annotations

import uuid
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import Any

import psycopg
import pytest
from mcp import Client
from mcp.shared.exceptions import MCPError
from mcp_types import INVALID_PARAMS, METHOD_NOT_FOUND, CallToolResult

from runner import Runner, Settings, build_server, from_claims
from runner.mcp_server.task_ext import created_task, detailed_task, extension_status
from tests.mcp_server.task_extension import (
    EXTENSION,
    CreatedTask,
    Tasks,
    cancel_task,
    create_task,
    get_task,
    update_task,
)
from tests.mcp_server.task_fleet import list_tasks, task_result

HELLO = {"action": "run", "item_id": "hello_world", "parameters": {"name": "Ada"}}
MISSING_CAPABILITY = -32021


def modern(runner: Runner, *extensions: Tasks) -> Client:
    return Client(build_server(runner), mode="2026-07-28", extensions=list(extensions))


@pytest.fixture
def stranger(make_runner: Callable[..., Runner], make_settings: Callable[..., Settings], tmp_path: Path) -> Runner:
    who = from_claims({"sub": str(uuid.uuid4()), "role": "authenticated", "aud": "authenticated"})
    return make_runner(make_settings(cache_dir=tmp_path / "stranger"), principal=who)


@pytest.fixture
def cancel_after(conn: psycopg.Connection) -> Iterator[list[str]]:
    made: list[str] = []
    yield made
    for task_id in made:
        conn.execute("select cancel_queued_run(%s)", (task_id,))


def queued(conn: psycopg.Connection) -> int:
    row = conn.execute("select count(*) from queued_runs").fetchone()
    return int(row[0]) if row else 0


# -- a queued run as the extension's task --------------------------------------------------------


def run(**fields: Any) -> dict[str, Any]:
    return {
        "id": str(uuid.uuid4()),
        "tool_id": "deploy",
        "status": "running",
        "queued_at": "2026-01-02T10:00:00+00:00",
        "started_at": "2026-01-02T10:00:01+00:00",
        "finished_at": None,
        "keep_until": "2026-01-03T10:00:00+00:00",
        "cancel_requested": False,
        "error": None,
        "result": None,
        "last_event": None,
        **fields,
    }


def kept(run_status: str, **answer: Any) -> dict[str, Any]:
    """A run that ended with the answer its worker kept."""
    base = {"tool_id": "deploy", "version": "1.0.0", "status": run_status, "output": {"ok": True}, "error": None}
    return run(status=run_status, result={**base, **answer}, finished_at="2026-01-02T10:00:09+00:00")


@pytest.mark.parametrize(
    ("status", "task"),
    [
        ("queued", "working"),
        ("running", "working"),
        ("retrying", "working"),
        ("waiting_approval", "working"),  # a person approves it, not the client: no input request
        ("success", "completed"),
        ("error", "completed"),  # isError is a result, not a protocol failure (the extension's rule)
        ("timeout", "completed"),
        ("cancelled", "cancelled"),
    ],
)
def test_each_run_status_is_an_extension_task_status(status: str, task: str) -> None:
    assert extension_status(run(status=status)) == task


def test_a_run_dead_lettered_without_an_answer_is_the_one_failed_task() -> None:
    dead = run(status="dead", error="every attempt failed: worker lost")
    assert extension_status(dead) == "failed"
    got = detailed_task(dead)
    assert got["error"]["code"] == -32603 and "worker lost" in got["error"]["message"]
    assert "result" not in got
    answered = kept("dead", status="error", error="exit 3")
    assert extension_status(answered) == "completed" and detailed_task(answered)["result"]["isError"] is True


def test_the_task_is_flat_with_the_extensions_field_names_and_inlines_its_end() -> None:
    working = created_task(run())
    assert working["resultType"] == "task" and working["status"] == "working"
    assert working["ttlMs"] == 86_400_000 and working["pollIntervalMs"] == 1000
    assert "task" not in working and "ttl" not in working and "result" not in working
    done = detailed_task(kept("success"))
    assert done["resultType"] == "complete" and done["status"] == "completed"
    assert done["result"]["structuredContent"]["output"] == {"ok": True} and not done["result"].get("isError")
    assert "tasks/result" not in done["statusMessage"]
    waiting = detailed_task(run(status="waiting_approval", approval_id="a1b2"))
    assert waiting["status"] == "working" and "kiwi approve a1b2" in waiting["statusMessage"]
    assert "inputRequests" not in waiting


# -- the server ----------------------------------------------------------------------------------


async def test_the_extension_is_declared_on_2026_and_not_on_the_handshake(runner: Runner) -> None:
    async with Client(build_server(runner), mode="auto", extensions=[Tasks()]) as client:  # server/discover
        assert client.session.protocol_version == "2026-07-28"
        capabilities = client.server_capabilities
        assert (capabilities.extensions or {}).get(EXTENSION) == {}
        assert capabilities.tasks is None  # 2025-11-25's capability is not this revision's
        listed = {t.name: t.execution for t in (await client.list_tools()).tools}
        assert listed["execute"] is None  # server-directed: no per-tool taskSupport on this revision
    async with Client(build_server(runner), mode="legacy") as legacy:
        assert EXTENSION not in (legacy.server_capabilities.extensions or {})


async def test_a_declaring_clients_run_is_a_task_polled_updated_and_cancelled_from_another_instance(
    runner: Runner, conn: psycopg.Connection, cancel_after: list[str]
) -> None:
    async with modern(runner, Tasks()) as on_a, modern(runner, Tasks()) as on_b:
        created = await create_task(on_a, "execute", HELLO)
        cancel_after.append(created.task_id)
        assert created.status == "working" and "waits for a worker" in (created.status_message or "")
        row = conn.execute("select status, version from queued_runs where id = %s", (created.task_id,)).fetchone()
        assert row == ("queued", "1.0.0")  # durable before the answer: the queued run is the task

        polled = await get_task(on_b, created.task_id)  # another server object: nothing kept in one
        assert polled.result_type == "complete" and polled.status == "working"
        assert polled.created_at == created.created_at and polled.result is None and polled.error is None

        assert (await update_task(on_b, created.task_id, {"nothing-asked": {"action": "accept"}})) is not None
        assert (await get_task(on_a, created.task_id)).status == "working"  # answers to no request: ignored

        await cancel_task(on_b, created.task_id)
        cancelled = await get_task(on_a, created.task_id)
        assert cancelled.status == "cancelled" and cancelled.result is None
        await cancel_task(on_a, created.task_id)  # ended: still acknowledged, and stays as it ended
        assert (await get_task(on_b, created.task_id)).status == "cancelled"


async def test_a_client_that_does_not_declare_it_gets_the_answer_and_no_task_methods(
    runner: Runner, conn: psycopg.Connection, cancel_after: list[str]
) -> None:
    before = queued(conn)
    async with modern(runner) as plain:
        answer = await plain.call_tool("execute", HELLO)  # run now, as always
        assert not answer.is_error and answer.structured_content is not None
        assert answer.structured_content["output"] == {"greeting": "Hello, Ada!"}
        assert queued(conn) == before
    async with modern(runner, Tasks()) as declaring:
        task_id = (await create_task(declaring, "execute", HELLO)).task_id
        cancel_after.append(task_id)
    async with modern(runner) as plain:
        for ask in (get_task, cancel_task):
            with pytest.raises(MCPError) as missing:
                await ask(plain, task_id)
            assert missing.value.code == MISSING_CAPABILITY
            assert missing.value.data["requiredCapabilities"] == {"extensions": {EXTENSION: {}}}


async def test_what_cannot_be_a_task_is_answered_directly(runner: Runner, conn: psycopg.Connection) -> None:
    tasks = Tasks()
    before = queued(conn)
    async with modern(runner, tasks) as client:
        found = await client.call_tool("search", {"query": "hello"})  # not a task tool
        assert not found.is_error
        helped = await client.call_tool("execute", {"action": "help"})  # not a run
        assert isinstance(helped, CallToolResult)
        bad = await client.call_tool("execute", {**HELLO, "parameters": {"name": 3}})  # refused, as directly
        assert bad.is_error and bad.structured_content is not None
        assert "invalid_parameters" in str(bad.structured_content), bad.structured_content
        unknown = await client.call_tool("execute", {"action": "run", "item_id": f"no_such_{uuid.uuid4().hex[:8]}"})
        assert unknown.is_error
    assert tasks.created == [] and queued(conn) == before


async def test_unknown_foreign_and_malformed_tasks_are_invalid_params(
    runner: Runner, stranger: Runner, cancel_after: list[str]
) -> None:
    async with modern(runner, Tasks()) as owner:
        task_id = (await create_task(owner, "execute", HELLO)).task_id
        cancel_after.append(task_id)
        for unknown in (str(uuid.uuid4()), "not-a-task"):
            for ask in (get_task, cancel_task):
                with pytest.raises(MCPError) as refused:
                    await ask(owner, unknown)
                assert refused.value.code == INVALID_PARAMS and refused.value.message.startswith("Failed to")
    async with modern(stranger, Tasks()) as other:
        for ask in (get_task, cancel_task):
            with pytest.raises(MCPError) as hidden:
                await ask(other, task_id)
            assert hidden.value.code == INVALID_PARAMS and "not found" in hidden.value.message
        with pytest.raises(MCPError) as hidden_update:
            await update_task(other, task_id, {})
        assert hidden_update.value.code == INVALID_PARAMS
    async with modern(runner, Tasks()) as owner:
        assert (await get_task(owner, task_id)).status == "working"  # the stranger's cancel did nothing


async def test_each_revision_has_its_own_methods(runner: Runner, cancel_after: list[str]) -> None:
    async with modern(runner, Tasks()) as client:
        task_id = (await create_task(client, "execute", HELLO)).task_id
        cancel_after.append(task_id)
        with pytest.raises(MCPError) as no_result:
            await task_result(client, task_id)
        assert no_result.value.code == METHOD_NOT_FOUND
        with pytest.raises(MCPError) as no_list:
            await list_tasks(client)
        assert no_list.value.code == METHOD_NOT_FOUND
    async with Client(build_server(runner), mode="legacy") as legacy:
        with pytest.raises(MCPError) as no_update:
            await update_task(legacy, task_id, {})
        assert no_update.value.code == METHOD_NOT_FOUND


def test_the_claimed_shape_is_the_extensions() -> None:
    wire = created_task(run())
    parsed = CreatedTask.model_validate(wire)
    assert parsed.task_id == wire["taskId"] and parsed.ttl_ms == wire["ttlMs"]
