"""Threads nested under their caller: a thread started in an execution context (an agent's
directive, or another thread) runs its directive as a child of that context, so it can only
narrow its permissions, and its budget is what its caller has left, at most.

Against the real database and the FAKE model provider of tests/test_thread.py (a local HTTP
server replaying a script; no hosted model).
"""

from __future__ import annotations

import json
import os
from collections.abc import AsyncIterator, Callable, Iterator
from contextlib import asynccontextmanager
from pathlib import Path
from typing import Any

import psycopg
import pytest
from mcp import Client

from runner import PostgresRegistry, Runner, build_server, local_owner, standard_dispatcher
from tests.conftest import local_settings
from tests.test_thread import FakeProvider, anthropic_answer, anthropic_tool_use


@pytest.fixture
def provider() -> Iterator[FakeProvider]:
    fake = FakeProvider()
    yield fake
    fake.close()


@pytest.fixture
def sessions(conn: psycopg.Connection) -> Iterator[list[str]]:
    made: list[str] = []
    yield made
    for sid in made:
        conn.execute("delete from audit_log where session_id = %s", (sid,))
        conn.execute("delete from execution_contexts where session_id = %s", (sid,))


def directive_of(publish_tool: Callable[..., str], tools: list[str]) -> str:
    return publish_tool(
        "nest_directive",
        {
            "tool_type": "directive",
            "executor": "directive_runtime",
            "requires": {"tools": [{"id": t} for t in tools]},
            "permissions": {"tools": tools, "shell": ["bash"]},
        },
        {"d.md": "# Do the work\nUse the tools offered.\n"},
        entrypoint="d.md",
    )


def thread_on(publish_tool: Callable[..., str], directive: str, budget: dict[str, Any]) -> str:
    return publish_tool(
        "nest_thread",
        {"tool_type": "thread", "executor": "llm_runtime", "config": {"directive": directive, "budget": budget}},
    )


def runner_for(database_url: str, cache_dir: Path, provider: FakeProvider) -> Runner:
    environ = {**os.environ, "ANTHROPIC_BASE_URL": provider.url}
    registry = PostgresRegistry(database_url, principal=local_owner())
    return Runner(registry, local_settings(database_url, cache_dir), dispatcher=standard_dispatcher(), environ=environ)


@asynccontextmanager
async def kiwi(runner: Runner, session: str) -> AsyncIterator[Client]:
    try:
        async with Client(build_server(runner, session_id=session)) as client:
            yield client
    finally:
        await runner.aclose()


async def test_a_thread_run_in_a_narrower_context_cannot_widen_it_through_its_directive(
    database_url: str,
    tmp_path: Path,
    provider: FakeProvider,
    publish_tool: Callable[..., str],
    sessions: list[str],
) -> None:
    """An agent under a context that allows hello_world only runs a thread whose directive
    declares format_bytes too: the directive's context would be wider than the agent's, so the
    thread stops before the model is asked anything."""
    thread = thread_on(publish_tool, directive_of(publish_tool, ["hello_world", "format_bytes"]), {"tokens": 100})
    provider.script = [anthropic_tool_use("format_bytes", {"bytes": 1}), anthropic_answer("done")]
    session = "test-nesting-agent"
    sessions.append(session)
    async with kiwi(runner_for(database_url, tmp_path, provider), session) as client:
        opened = await client.call_tool(
            "execute", {"action": "open_context", "permissions": {"tools": ["hello_world"]}}
        )
        context = opened.structured_content["context"]["id"]
        ran = await client.call_tool("execute", {"action": "run", "item_id": thread, "context": context})
    result = ran.structured_content
    sessions.append(result["output"]["session"])
    assert ran.is_error and result["status"] == "error"
    assert "could not be run" in result["error"] and "format_bytes" in result["error"]
    assert "wider than the parent's" in result["error"]
    assert provider.requests == [], "the model never ran: nothing escaped the agent's context"
    assert result["output"]["parent"] == {"session": session, "context": context}


async def test_a_sub_thread_is_nested_under_its_callers_context_and_budget(
    database_url: str,
    conn: psycopg.Connection,
    tmp_path: Path,
    provider: FakeProvider,
    publish_tool: Callable[..., str],
    sessions: list[str],
) -> None:
    """A thread whose model calls another thread: the sub-thread's directive context is a child
    of its caller's, and its budget (1000 tokens asked) is what the caller had left (70); what
    it spends is the caller's too, so both stop on their token budget."""
    child = thread_on(publish_tool, directive_of(publish_tool, ["hello_world"]), {"tokens": 1000})
    parent = thread_on(publish_tool, directive_of(publish_tool, ["hello_world", child]), {"tokens": 100})
    provider.script = [
        anthropic_tool_use(child, {}, tokens=30),  # the parent's turn
        anthropic_tool_use("hello_world", {"name": "Ada"}, tokens=80),  # the child's
        anthropic_answer("never asked", tokens=10),
    ]
    runner = runner_for(database_url, tmp_path, provider)
    try:
        result = await runner.run(parent, {})
    finally:
        await runner.aclose()
    out = result.output
    sessions.append(out["session"])
    assert result.status == "error" and out["budget_exhausted"] == "tokens", result.error
    assert out["usage"]["tokens"] == 110, "the sub-thread's tokens are the caller's too"
    assert len(provider.requests) == 2, "neither thread asked the model again once over budget"

    tool = next(e for e in out["transcript"] if e["role"] == "tool")
    assert tool["is_error"] and "tokens budget ran out (80 of 70)" in tool["text"]
    child_session = next(
        r[0]
        for r in conn.execute(
            "select session_id from execution_contexts where parent_id = %s and session_id <> %s",
            (out["context"]["id"], out["session"]),
        )
    )
    sessions.append(child_session)
    assert child_session != out["session"], "the sub-thread's directive context is a child of its caller's"
    ran = conn.execute(
        "select count(*) from audit_log where session_id = %s and tool_id = 'hello_world'", (child_session,)
    ).fetchone()
    assert ran is not None and ran[0] == 0, "its tool call came after its budget ran out: not made"
    assert json.loads(json.dumps(out["budget"]))["tokens"] == 100
