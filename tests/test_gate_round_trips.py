"""The gate's database round trips before a call goes on, counted on the real registry.

Running a directive is one round trip (public.admit_call: the decision and the child
context opened together; once the decision is remembered, open_context alone); the calls
made under the context it opened need no read of that context, and once their verdict is
remembered no round trip at all. A context the runner has not seen is read in the same
round trip as the call's decision. Only the record writes behind the reply (record_*) are
left out of the count: they are not awaited by the call.
"""

from __future__ import annotations

import asyncio
import uuid
from collections.abc import AsyncIterator, Callable
from pathlib import Path
from typing import Any

import psycopg
import pytest

from runner import Call, Plan, PostgresRegistry, Runner, local_owner
from tests.conftest import local_settings


class Trips:
    """The registry functions a backend is asked for, in order, counted as they pass through."""

    def __init__(self, registry: PostgresRegistry) -> None:
        self.sent: list[str] = []
        carry = registry.backend.call

        async def call(function: str, args: Any, **kw: Any) -> Any:
            if not function.startswith("record_"):
                self.sent.append(function)
            return await carry(function, args, **kw)

        registry.backend.call = call  # type: ignore[method-assign]

    def take(self) -> list[str]:
        sent, self.sent = self.sent, []
        return sent


async def warm(runner: Runner, *tool_ids: str) -> list[Plan]:
    """The tools' plans, resolved before counting, once the registry's memory is live (it starts
    listening at the second plan asked for), as in a long-lived runner."""
    plans = [await runner.plan(tool_id) for tool_id in tool_ids]
    for _ in range(500):
        if runner.registry.backend.cache.live:  # type: ignore[union-attr]
            break
        await asyncio.sleep(0.01)
    return plans


@pytest.fixture
async def kiwi(database_url: str, tmp_path: Path, conn: psycopg.Connection) -> AsyncIterator[Runner]:
    settings = local_settings(database_url, tmp_path)
    session = f"test-gate-trips-{uuid.uuid4()}"
    runner = Runner(PostgresRegistry(database_url, principal=local_owner()), settings, session=session)
    try:
        yield runner
    finally:
        await runner.aclose()
        conn.execute("delete from execution_contexts where session_id = %s", (session,))
        conn.execute("delete from audit_log where session_id = %s", (session,))


async def test_a_directive_run_is_one_round_trip_and_the_calls_it_permits_then_none(
    kiwi: Runner, publish_tool: Callable[..., str]
) -> None:
    directive = publish_tool(
        "trips_directive",
        {"tool_type": "directive", "executor": "directive_runtime", "permissions": {"tools": ["hello_world"]}},
        {"d.md": "# Greet\n"},
        entrypoint="d.md",
    )
    run_it, hello = await warm(kiwi, directive, "hello_world")
    trips = Trips(kiwi.registry)  # type: ignore[arg-type]
    call = Call(kiwi.session)

    first = await kiwi.gate.admit(run_it, {}, call, False)
    assert trips.take() == ["admit_call"], "running a directive: decided and its context opened in one round trip"
    child = first.child_context or {}
    assert child.get("directive") == f"{directive}@1.0.0" and child["permissions"]["tools"] == ["hello_world"]

    under = Call(kiwi.session, context=child["id"])
    await kiwi.gate.admit(hello, {"name": "Ada"}, under, False)
    assert trips.take() == ["check_call"], "the first call under it: its context is not read again"
    for _ in range(3):
        await kiwi.gate.admit(hello, {"name": "Ada"}, under, False)
    assert trips.take() == [], "a warm repeat makes no round trip before it goes on"

    again = await kiwi.gate.admit(run_it, {}, call, False)
    assert trips.take() == ["open_context"], "run again, its decision remembered: only its new context is opened"
    assert (again.child_context or {}).get("id") not in (None, child["id"])


async def test_a_context_the_runner_has_not_seen_is_read_with_the_decision(
    kiwi: Runner, publish_tool: Callable[..., str]
) -> None:
    directive = publish_tool(
        "trips_directive",
        {"tool_type": "directive", "executor": "directive_runtime", "permissions": {"tools": ["hello_world"]}},
        {"d.md": "# Greet\n"},
        entrypoint="d.md",
    )
    opened = await kiwi.registry.open_context(kiwi.session, directive)  # as `execute open_context` opens one
    _, hello = await warm(kiwi, directive, "hello_world")
    trips = Trips(kiwi.registry)  # type: ignore[arg-type]
    under = Call(kiwi.session, context=opened["id"])

    await kiwi.gate.admit(hello, {"name": "Ada"}, under, False)
    assert trips.take() == ["admit_call"], "the context and the decision in one round trip, not get_context first"
    await kiwi.gate.admit(hello, {"name": "Ada"}, under, False)
    assert trips.take() == [], "then the context is held and the verdict remembered"

    other = await kiwi.registry.open_context(kiwi.session, directive)
    trips.take()
    await kiwi.gate.admit(hello, {"name": "Ada"}, Call(kiwi.session, context=other["id"]), False)
    assert trips.take() == ["get_context"], "with the verdict remembered, only the context is read"


async def test_a_call_naming_paths_under_a_new_context_sends_no_path(
    kiwi: Runner, publish_tool: Callable[..., str]
) -> None:
    writer = publish_tool(
        "trips_writer",
        {"tool_type": "script", "executor": "bash_runtime", "config": {"fs": {"write": ["path"]}}},
        {"run.sh": "echo written\n"},
        entrypoint="run.sh",
    )
    opened = await kiwi.registry.open_context(kiwi.session, None, None, {"fs_write": ["tools/*"]})
    plan, _ = await warm(kiwi, writer, "hello_world")
    trips = Trips(kiwi.registry)  # type: ignore[arg-type]
    await kiwi.gate.admit(plan, {"path": "tools/a.txt"}, Call(kiwi.session, context=opened["id"]), False)
    assert trips.take() == ["get_context", "check_call"], "the context read first, the path checked here"
