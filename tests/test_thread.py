"""Threads (runner/handlers/thread.py) against the real database and a FAKE model provider.

No hosted model is reachable here. `FakeProvider` is a local HTTP server that plays a
scripted, tool-using model: it answers each request with the next reply of its script, in the
Anthropic Messages or OpenAI chat format, and keeps every request it got. It is a fake: it
reads nothing of the conversation and decides nothing.

Every tool call the scripted model makes goes through the same guarded path as MCP
`execute run`, so each one leaves an audit row in the thread's session.
"""

from __future__ import annotations

import json
import os
import threading
import time
import uuid
from collections.abc import Callable, Iterator
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from pathlib import Path
from typing import Any

import psycopg
import pytest

from runner import PostgresRegistry, Runner, RunResult, local_owner, standard_dispatcher, standard_handlers
from runner.harness.dispatch import Lazy
from tests.conftest import local_settings

Reply = dict[str, Any]


class FakeProvider:
    """A FAKE LLM provider: a local HTTP server replaying `script` (one reply per request; the
    last reply repeats once the script runs out). `requests` holds each (path, body) received."""

    def __init__(self) -> None:
        self.script: list[Reply] = []
        self.delay_s = 0.0  # how long it takes to answer
        self.requests: list[tuple[str, dict[str, Any]]] = []
        fake = self

        class Handler(BaseHTTPRequestHandler):
            def do_POST(self) -> None:
                length = int(self.headers.get("Content-Length") or 0)
                fake.requests.append((self.path, json.loads(self.rfile.read(length) or b"{}")))
                n = len(fake.requests) - 1
                reply = fake.script[min(n, len(fake.script) - 1)]
                time.sleep(fake.delay_s)
                data = json.dumps(reply).encode()
                self.send_response(200)
                self.send_header("Content-Type", "application/json")
                self.send_header("Content-Length", str(len(data)))
                self.end_headers()
                self.wfile.write(data)

            def log_message(self, *args: Any) -> None:
                return None

        self.server = ThreadingHTTPServer(("127.0.0.1", 0), Handler)
        self.url = f"http://127.0.0.1:{self.server.server_address[1]}"
        threading.Thread(target=self.server.serve_forever, daemon=True).start()

    def close(self) -> None:
        self.server.shutdown()
        self.server.server_close()


# --- scripted replies, in each format ---------------------------------------------------------


def anthropic_tool_use(name: str, arguments: dict[str, Any], tokens: int = 20) -> Reply:
    return {
        "id": f"msg_{uuid.uuid4().hex[:8]}",
        "type": "message",
        "role": "assistant",
        "content": [
            {"type": "text", "text": f"Calling {name}."},
            {"type": "tool_use", "id": f"toolu_{uuid.uuid4().hex[:8]}", "name": name, "input": arguments},
        ],
        "stop_reason": "tool_use",
        "usage": {"input_tokens": tokens // 2, "output_tokens": tokens - tokens // 2},
    }


def anthropic_answer(text: str, tokens: int = 20) -> Reply:
    return {
        "id": "msg_final",
        "type": "message",
        "role": "assistant",
        "content": [{"type": "text", "text": text}],
        "stop_reason": "end_turn",
        "usage": {"input_tokens": tokens // 2, "output_tokens": tokens - tokens // 2},
    }


def openai_tool_call(name: str, arguments: dict[str, Any], tokens: int = 20) -> Reply:
    call = {"id": f"call_{uuid.uuid4().hex[:8]}", "type": "function"}
    call["function"] = {"name": name, "arguments": json.dumps(arguments)}
    return {
        "choices": [
            {
                "index": 0,
                "message": {"role": "assistant", "content": None, "tool_calls": [call]},
                "finish_reason": "tool_calls",
            }
        ],
        "usage": {"prompt_tokens": tokens // 2, "completion_tokens": tokens - tokens // 2, "total_tokens": tokens},
    }


def openai_answer(text: str, tokens: int = 20) -> Reply:
    return {
        "choices": [{"index": 0, "message": {"role": "assistant", "content": text}, "finish_reason": "stop"}],
        "usage": {"prompt_tokens": tokens // 2, "completion_tokens": tokens - tokens // 2, "total_tokens": tokens},
    }


# --- fixtures ----------------------------------------------------------------------------------


@pytest.fixture
def provider() -> Iterator[FakeProvider]:
    fake = FakeProvider()
    yield fake
    fake.close()


@pytest.fixture
def sessions(conn: psycopg.Connection) -> Iterator[list[str]]:
    """The thread sessions a test made; their audit rows and contexts are deleted afterwards."""
    made: list[str] = []
    yield made
    for sid in made:
        conn.execute("delete from audit_log where session_id = %s", (sid,))
        conn.execute("delete from execution_contexts where session_id = %s", (sid,))


@pytest.fixture
def thread_of(publish_tool: Callable[..., str]) -> Callable[..., str]:
    """A throwaway directive (requires and permits hello_world and format_bytes; a directive
    that needs a tool it does not permit is refused at publish) and a thread following it,
    which narrows the permissions to hello_world."""

    def make(tier: str, budget: dict[str, Any] | None, **config: Any) -> str:
        directive = publish_tool(
            "thread_directive",
            {
                "tool_type": "directive",
                "executor": "directive_runtime",
                "requires": {"tools": [{"id": "hello_world"}, {"id": "format_bytes"}]},
                "permissions": {"tools": ["hello_world", "format_bytes"], "shell": ["bash"]},
            },
            {"d.md": "# Greet Ada\nGreet Ada with hello_world, then say what it answered.\n"},
            entrypoint="d.md",
        )
        return publish_tool(
            "thread",
            {
                "tool_type": "thread",
                "executor": "llm_runtime",
                "config": {"directive": directive, "tier": tier, **({"budget": budget} if budget else {}), **config},
                "permissions": {"tools": ["hello_world"]},
            },
        )

    return make


async def run_thread(database_url: str, cache_dir: Path, provider: FakeProvider, thread: str) -> RunResult:
    settings = local_settings(database_url, cache_dir)
    environ = {**os.environ, "ANTHROPIC_BASE_URL": provider.url, "OPENAI_BASE_URL": provider.url}
    registry = PostgresRegistry(database_url, principal=local_owner())
    runner = Runner(registry, settings, dispatcher=standard_dispatcher(), environ=environ)
    try:
        return await runner.run(thread, {})
    finally:
        await runner.aclose()


def audit_rows(conn: psycopg.Connection, session_id: str) -> list[dict[str, Any]]:
    rows = conn.execute(
        "select to_jsonb(a) from audit_log a where session_id = %s order by at, id", (session_id,)
    ).fetchall()
    return [r[0] for r in rows]


# --- tests -------------------------------------------------------------------------------------


@pytest.mark.parametrize(
    ("tier", "path", "call", "answer"),
    [
        ("fast", "/v1/messages", anthropic_tool_use, anthropic_answer),
        ("openai_fast", "/v1/chat/completions", openai_tool_call, openai_answer),
    ],
)
async def test_a_thread_calls_a_tool_through_the_guarded_path_and_answers(
    database_url: str,
    conn: psycopg.Connection,
    tmp_path: Path,
    provider: FakeProvider,
    thread_of: Callable[..., str],
    sessions: list[str],
    tier: str,
    path: str,
    call: Callable[..., Reply],
    answer: Callable[..., Reply],
) -> None:
    thread = thread_of(tier, {"tokens": 1000, "tool_calls": 5, "seconds": 60})
    provider.script = [call("hello_world", {"name": "Ada"}), answer("The greeting was: Hello, Ada!")]
    result = await run_thread(database_url, tmp_path, provider, thread)
    sessions.append(result.output["session"])

    assert result.ok, result.error
    assert result.output["answer"] == "The greeting was: Hello, Ada!"
    assert result.output["usage"]["tokens"] == 40 and result.output["usage"]["tool_calls"] == 1
    first_path, first = provider.requests[0]
    assert first_path == path
    names = [t.get("name") or t.get("function", {}).get("name") for t in first["tools"]]
    assert sorted(names) == ["format_bytes", "hello_world"], "the directive's declared tools, with their schemas"
    assert "Greet Ada" in json.dumps(first), "the directive's instructions reach the model"
    fed_back = json.dumps(provider.requests[1][1])
    assert "Hello, Ada!" in fed_back, "the tool's result goes back to the model"

    tool = next(e for e in result.output["transcript"] if e["role"] == "tool")
    assert tool["name"] == "hello_world" and not tool["is_error"]
    directive_run, hello = audit_rows(conn, result.output["session"])
    assert directive_run["tool_id"].startswith("thread_directive_") and directive_run["decision"] == "allowed"
    assert (hello["tool_id"], hello["decision"], hello["outcome"]) == ("hello_world", "allowed", "success")
    assert hello["directive"] == directive_run["directive"], "the call is audited under the directive"


async def test_a_tool_the_permissions_forbid_is_refused_fed_back_and_audited(
    database_url: str,
    conn: psycopg.Connection,
    tmp_path: Path,
    provider: FakeProvider,
    thread_of: Callable[..., str],
    sessions: list[str],
) -> None:
    thread = thread_of("fast", {"tokens": 1000, "tool_calls": 5, "seconds": 60})
    provider.script = [anthropic_tool_use("format_bytes", {"bytes": 1024}), anthropic_answer("I was not allowed.")]
    result = await run_thread(database_url, tmp_path, provider, thread)
    sessions.append(result.output["session"])

    assert result.ok, result.error
    lacking = 'tools: format_bytes is not allowed by ["hello_world"]'
    fed_back = provider.requests[1][1]["messages"][-1]["content"][0]
    assert fed_back["type"] == "tool_result" and fed_back["is_error"] is True
    assert lacking in fed_back["content"], "the model is told which permission is missing"
    refusal = audit_rows(conn, result.output["session"])[-1]
    assert (refusal["tool_id"], refusal["decision"], refusal["outcome"]) == ("format_bytes", "refused", None)
    assert refusal["reason"] == f"permission {lacking}"


async def test_a_thread_that_exceeds_its_tool_call_budget_stops_cleanly_with_its_audit_trail_intact(
    database_url: str,
    conn: psycopg.Connection,
    tmp_path: Path,
    provider: FakeProvider,
    thread_of: Callable[..., str],
    sessions: list[str],
) -> None:
    thread = thread_of("openai_fast", {"tokens": 100_000, "tool_calls": 3, "seconds": 60})
    provider.script = [openai_tool_call("hello_world", {"name": "Ada"})]  # calls tools forever
    result = await run_thread(database_url, tmp_path, provider, thread)
    sessions.append(result.output["session"])

    assert result.status == "error" and result.output["budget_exhausted"] == "tool_calls"
    assert "tool_calls budget ran out (3 of 3)" in (result.error or "")
    assert len(provider.requests) == 4, "three calls ran; the fourth was not started"
    tools = [e for e in result.output["transcript"] if e["role"] == "tool"]
    assert len(tools) == 3 and not any(t["is_error"] for t in tools)
    rows = audit_rows(conn, result.output["session"])
    calls = [r for r in rows if r["tool_id"] == "hello_world"]
    assert [(r["decision"], r["outcome"]) for r in calls] == [("allowed", "success")] * 3
    assert len(rows) == 4, "the directive's run and each executed call, nothing more"


async def test_a_thread_that_exceeds_its_token_budget_stops(
    database_url: str,
    conn: psycopg.Connection,
    tmp_path: Path,
    provider: FakeProvider,
    thread_of: Callable[..., str],
    sessions: list[str],
) -> None:
    thread = thread_of("fast", {"tokens": 50, "tool_calls": 10, "seconds": 60})
    provider.script = [anthropic_tool_use("hello_world", {"name": "Ada"}, tokens=30)]
    result = await run_thread(database_url, tmp_path, provider, thread)
    sessions.append(result.output["session"])

    assert result.status == "error" and result.output["budget_exhausted"] == "tokens"
    assert "tokens budget ran out (60 of 50)" in (result.error or "")
    assert result.output["usage"]["tool_calls"] == 1, "the call of the turn within budget ran; the next did not"
    calls = [r for r in audit_rows(conn, result.output["session"]) if r["tool_id"] == "hello_world"]
    assert [(r["decision"], r["outcome"]) for r in calls] == [("allowed", "success")]


async def test_a_thread_that_runs_out_of_seconds_stops(
    database_url: str,
    conn: psycopg.Connection,
    tmp_path: Path,
    provider: FakeProvider,
    thread_of: Callable[..., str],
    sessions: list[str],
) -> None:
    thread = thread_of("fast", {"tokens": 1000, "tool_calls": 10, "seconds": 1.5})
    provider.script, provider.delay_s = [anthropic_answer("too late")], 3.0
    started = time.monotonic()
    result = await run_thread(database_url, tmp_path, provider, thread)
    sessions.append(result.output["session"])

    assert time.monotonic() - started < 3.0, "the model's request is cut off at the budget"
    assert result.status == "error" and result.output["budget_exhausted"] == "seconds"
    assert result.output.get("answer") is None
    rows = audit_rows(conn, result.output["session"])
    assert len(rows) == 1 and rows[0]["tool_id"].startswith("thread_directive_"), "only the directive's run"


async def test_a_threads_own_timeout_is_its_time_limit_as_the_documents_write_it(
    database_url: str, tmp_path: Path, provider: FakeProvider, thread_of: Callable[..., str], sessions: list[str]
) -> None:
    """Regression (issue 15): `timeout` on a thread was accepted and ignored (only budget.seconds
    limited it), so a thread whose model was slow ran on; the documents' key is the thread's limit."""
    thread = thread_of("fast", None, timeout=1.5)
    provider.script, provider.delay_s = [anthropic_answer("too late")], 3.0
    started = time.monotonic()
    result = await run_thread(database_url, tmp_path, provider, thread)
    sessions.append(result.output["session"])
    assert time.monotonic() - started < 3.0, "the model's request is cut off at the thread's timeout"
    assert result.status == "error" and result.output["budget_exhausted"] == "seconds"


async def test_threads_send_their_model_requests_over_the_http_client_primitives_pooled_client() -> None:
    handlers = {h.name: h for h in standard_handlers()}
    thread, http = handlers["thread"], handlers["http_client"]
    assert isinstance(thread, Lazy) and isinstance(http, Lazy)
    try:
        assert thread.instance()._client() is http.instance().client  # type: ignore[attr-defined]
    finally:
        await thread.aclose()
        await http.aclose()
