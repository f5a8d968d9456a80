"""What a thread costs in money: its model's tokens priced from public.model_prices, shown in
the run's result, kept in public.thread_usage, and held to a budget in money (cost_usd).

`kiwi run` as a real process, the real database, and the FAKE model provider of
tests/test_thread.py (a local HTTP server replaying a script; no hosted model).
"""

from __future__ import annotations

from collections.abc import Callable, Iterator
from pathlib import Path
from typing import Any

import psycopg
import pytest

from tests.kiwi_cli import kiwi_env, run_kiwi
from tests.test_thread import FakeProvider, anthropic_answer, anthropic_tool_use

pytestmark = pytest.mark.slow


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
        conn.execute("delete from thread_usage where session_id = %s", (sid,))


def priced_thread(publish_tool: Callable[..., str], budget: dict[str, Any]) -> str:
    """A thread on the `fast` tier (claude-haiku-4-5: $1 and $5 a million input and output tokens)."""
    directive = publish_tool(
        "cost_directive",
        {
            "tool_type": "directive",
            "executor": "directive_runtime",
            "requires": {"tools": [{"id": "hello_world"}]},
            "permissions": {"tools": ["hello_world"], "shell": ["bash"]},
        },
        {"d.md": "# Greet Ada\n"},
        entrypoint="d.md",
    )
    return publish_tool(
        "cost_thread",
        {
            "tool_type": "thread",
            "executor": "llm_runtime",
            "config": {"directive": directive, "tier": "fast", "budget": budget},
        },
    )


def kiwi_run(database_url: str, tmp_path: Path, provider: FakeProvider, thread: str) -> Any:
    env = kiwi_env(database_url, tmp_path / "cache", ANTHROPIC_BASE_URL=provider.url)
    done = run_kiwi(["run", thread, "--json"], cwd=tmp_path, env=env)
    assert done.out, done.err
    return done.json()


def test_a_threads_cost_in_money_is_in_its_result_and_its_record(
    database_url: str,
    conn: psycopg.Connection,
    tmp_path: Path,
    provider: FakeProvider,
    publish_tool: Callable[..., str],
    sessions: list[str],
) -> None:
    thread = priced_thread(publish_tool, {"tokens": 10_000})
    # 10 input and 10 output tokens a turn: 10 * $1 / 1e6 + 10 * $5 / 1e6 = $0.00006
    provider.script = [anthropic_tool_use("hello_world", {"name": "Ada"}), anthropic_answer("Hello, Ada!")]
    result = kiwi_run(database_url, tmp_path, provider, thread)
    usage = result["output"]["usage"]
    sessions.append(result["output"]["session"])

    assert result["status"] == "success", result["error"]
    assert (usage["input_tokens"], usage["output_tokens"], usage["tokens"]) == (20, 20, 40)
    assert usage["cost_usd"] == pytest.approx(0.00012)
    assert result["output"]["price"]["model"] == "claude-haiku-4-5"
    assert usage["recorded"]["cost_usd"] == pytest.approx(0.00012), "the database priced it alike"
    row = conn.execute(
        "select model, input_tokens, output_tokens, tool_calls, cost_usd, status from thread_usage where id = %s",
        (usage["recorded"]["id"],),
    ).fetchone()
    assert row is not None
    assert row[:4] == ("claude-haiku-4-5", 20, 20, 1) and float(row[4]) == pytest.approx(0.00012)
    assert row[5] == "success"


def test_a_thread_stops_when_its_budget_in_money_runs_out(
    database_url: str,
    conn: psycopg.Connection,
    tmp_path: Path,
    provider: FakeProvider,
    publish_tool: Callable[..., str],
    sessions: list[str],
) -> None:
    thread = priced_thread(publish_tool, {"tokens": 10_000, "cost_usd": 0.0001})
    provider.script = [anthropic_tool_use("hello_world", {"name": "Ada"})]  # calls tools forever
    result = kiwi_run(database_url, tmp_path, provider, thread)
    sessions.append(result["output"]["session"])

    assert result["status"] == "error" and result["output"]["budget_exhausted"] == "cost_usd"
    assert "cost_usd budget ran out (0.00012 of 0.0001)" in result["error"]
    assert result["output"]["usage"]["tool_calls"] == 1, "the turn over budget made no call"


def test_a_budget_in_money_needs_a_price(
    database_url: str,
    conn: psycopg.Connection,
    tmp_path: Path,
    provider: FakeProvider,
    publish_tool: Callable[..., str],
) -> None:
    thread = priced_thread(publish_tool, {"cost_usd": 1})
    conn.execute("delete from model_prices where model = 'claude-haiku-4-5' returning *")
    try:
        result = kiwi_run(database_url, tmp_path, provider, thread)
    finally:
        conn.execute(
            "insert into model_prices (model, input_usd_per_mtok, output_usd_per_mtok, note) "
            "values ('claude-haiku-4-5', 1, 5, 'Anthropic list price') on conflict do nothing"
        )
    assert result["status"] == "error" and "no price for claude-haiku-4-5" in result["error"]
    assert provider.requests == [], "no model ran without a price"
