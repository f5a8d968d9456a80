"""`spawn_thread`, the seeded tool (supabase/seed/spawn_thread): a thread's model starts a
sub-thread as a tool call, through the gate, nested under the caller's context and budget.

Through Kiwi's MCP server, against the real database, in the real sandbox, with the FAKE model
provider of tests/test_thread.py (a local HTTP server replaying a script; no hosted model).
"""

from __future__ import annotations

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

SESSION = "test-spawn-thread"


@pytest.fixture
def provider() -> Iterator[FakeProvider]:
    fake = FakeProvider()
    yield fake
    fake.close()


@pytest.fixture
def sessions(conn: psycopg.Connection) -> Iterator[list[str]]:
    made: list[str] = [SESSION]
    yield made
    for sid in made:
        conn.execute("delete from audit_log where session_id = %s", (sid,))
        conn.execute("delete from execution_contexts where session_id = %s", (sid,))


def directive_of(publish_tool: Callable[..., str], tools: list[str]) -> str:
    return publish_tool(
        "spawn_directive",
        {
            "tool_type": "directive",
            "executor": "directive_runtime",
            "requires": {"tools": [{"id": t} for t in tools]},
            "permissions": {"tools": tools, "shell": ["bash", "python"]},
        },
        {"d.md": "# Delegate\nHand the greeting to a sub-thread.\n"},
        entrypoint="d.md",
    )


def thread_on(publish_tool: Callable[..., str], directive: str, budget: dict[str, Any]) -> str:
    return publish_tool(
        "spawn_thread_t",
        {"tool_type": "thread", "executor": "llm_runtime", "config": {"directive": directive, "budget": budget}},
    )


@asynccontextmanager
async def kiwi(database_url: str, cache_dir: Path, provider: FakeProvider) -> AsyncIterator[Client]:
    environ = {**os.environ, "ANTHROPIC_BASE_URL": provider.url}
    registry = PostgresRegistry(database_url, principal=local_owner())
    settings = local_settings(database_url, cache_dir)
    runner = Runner(registry, settings, dispatcher=standard_dispatcher(), environ=environ)
    try:
        async with Client(build_server(runner, session_id=SESSION)) as client:
            yield client
    finally:
        await runner.aclose()


async def test_a_thread_spawns_a_sub_thread_through_the_spawn_thread_tool(
    database_url: str,
    conn: psycopg.Connection,
    tmp_path: Path,
    provider: FakeProvider,
    publish_tool: Callable[..., str],
    sessions: list[str],
) -> None:
    child = thread_on(publish_tool, directive_of(publish_tool, ["hello_world"]), {"tokens": 1000})
    parent = thread_on(publish_tool, directive_of(publish_tool, ["hello_world", "spawn_thread"]), {"tokens": 500})
    provider.script = [
        anthropic_tool_use("spawn_thread", {"thread": child, "budget": {"tokens": 300}}, tokens=40),  # parent
        anthropic_tool_use("hello_world", {"name": "Ada"}, tokens=20),  # child
        anthropic_answer("The child says: Hello, Ada!", tokens=20),  # child
        anthropic_answer("Done: Hello, Ada!", tokens=20),  # parent
    ]
    async with kiwi(database_url, tmp_path, provider) as client:
        ran = await client.call_tool("execute", {"action": "run", "item_id": parent})
    out = ran.structured_content["output"]
    sessions.append(out["session"])
    assert not ran.is_error, ran.content
    assert out["answer"] == "Done: Hello, Ada!"
    assert out["usage"]["tokens"] == 100, "the sub-thread's 40 tokens are the caller's too"
    assert out["usage"]["tool_calls"] == 2, "spawn_thread, and the sub-thread's hello_world"

    spawned = next(e for e in out["transcript"] if e["role"] == "tool")
    assert spawned["name"] == "spawn_thread" and not spawned["is_error"], spawned["text"]
    assert "The child says: Hello, Ada!" in spawned["text"]
    assert '"tokens": 300' in spawned["text"], "the budget asked for, within what the caller had left (460)"

    rows = conn.execute(
        "select tool_id, decision from audit_log where session_id = %s order by at, id", (out["session"],)
    ).fetchall()
    tools = [r[0] for r in rows]
    assert tools[1:] == ["spawn_thread", child], "the sub-thread is started in its caller's session"
    assert all(r[1] == "allowed" for r in rows)
    child_contexts = conn.execute(
        "select session_id from execution_contexts where parent_id = %s and session_id <> %s",
        (out["context"]["id"], out["session"]),
    ).fetchall()
    assert len(child_contexts) == 1, "the sub-thread's directive context is a child of its caller's"
    sessions.append(child_contexts[0][0])


async def test_spawn_thread_cannot_hand_a_sub_thread_more_than_its_caller_has(
    database_url: str, tmp_path: Path, provider: FakeProvider, publish_tool: Callable[..., str], sessions: list[str]
) -> None:
    child = thread_on(publish_tool, directive_of(publish_tool, ["hello_world"]), {"tokens": 1000})
    parent = thread_on(publish_tool, directive_of(publish_tool, ["hello_world", "spawn_thread"]), {"tokens": 500})
    widened = {"thread": child, "permissions": {"tools": ["format_bytes"]}}
    provider.script = [anthropic_tool_use("spawn_thread", widened, tokens=40), anthropic_answer("refused", tokens=10)]
    async with kiwi(database_url, tmp_path, provider) as client:
        ran = await client.call_tool("execute", {"action": "run", "item_id": parent})
    out = ran.structured_content["output"]
    sessions.append(out["session"])
    spawned = next(e for e in out["transcript"] if e["role"] == "tool")
    assert spawned["is_error"] and "permission_denied" in spawned["text"]
    assert "format_bytes" in spawned["text"] and "wider than" in spawned["text"]
    assert len(provider.requests) == 2, "no sub-thread ran"
