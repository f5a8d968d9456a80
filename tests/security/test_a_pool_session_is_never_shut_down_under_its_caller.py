"""A pool session acquired just as its idle timer fires still serves the call (issue 26: the
flaky `test_an_idle_session_shuts_its_server_down` failed on a loaded machine with "the
connection had already ended").

The race: a call that starts a session waits for it to be ready; the session's owner task,
once ready, starts counting its idle time, and when the waiting call is slow to resume (a
loaded machine) the idle shutdown runs first and closes the session under it. Every retry
met the same race. Now a call holds its session from the moment it picks it, before it
waits, and the idle shutdown closes only a session nobody holds (both on the one event loop,
with no await between the check and the close).

The interleaving is forced, not timed: an idle shutdown of 0 s fires at the very moment the
session becomes ready, before the call that started it can resume.
"""

from __future__ import annotations

import asyncio
import os
import shutil

import pytest

from runner import McpPool, ServerSpec
from tests.mcp import EVERYTHING, alive, unique

NODE = shutil.which("node") or "node"
pytestmark = pytest.mark.skipif(not EVERYTHING.exists(), reason="needs node_modules (make deps)")


def everything(idle_shutdown_s: float) -> ServerSpec:
    return ServerSpec(
        ref="everything_test",
        key=unique("everything"),
        transport="stdio",
        argv=(NODE, str(EVERYTHING), "stdio"),
        env={"PATH": os.environ.get("PATH", "/usr/bin:/bin")},
        idle_shutdown_s=idle_shutdown_s,
    )


@pytest.mark.slow
async def test_a_session_idle_the_moment_it_is_ready_serves_the_call_that_started_it() -> None:
    pool = McpPool()
    spec = everything(idle_shutdown_s=0.0)
    try:
        result, facts = await pool.call_tool(spec, "echo", {"message": "first"})
        assert result.content[0].text == "Echo: first"  # type: ignore[union-attr]
        assert facts["attempts"] == 1, "the session was not closed under the call"
    finally:
        await pool.aclose()


@pytest.mark.slow
async def test_calls_waiting_for_the_same_session_are_all_served_and_then_it_shuts_down() -> None:
    pool = McpPool()
    spec = everything(idle_shutdown_s=0.0)
    try:
        results = await asyncio.gather(*(pool.call_tool(spec, "echo", {"message": f"m{i}"}) for i in range(10)))
        assert [r.content[0].text for r, _ in results] == [f"Echo: m{i}" for i in range(10)]  # type: ignore[union-attr]
        assert all(facts["attempts"] == 1 for _, facts in results)
        session = pool.session_for(spec.key)
        if session is not None:  # still open: idle now that nobody holds it, it closes by itself
            pid = session.pid
            await asyncio.wait_for(asyncio.shield(session._task), timeout=30)
            assert pid is None or not alive(pid)
        assert pool.session_for(spec.key) is None
    finally:
        await pool.aclose()
