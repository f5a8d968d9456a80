"""The session pool against the real everything server over stdio: sharing, reconnecting,
timeouts, idle shutdown, and no process left behind."""

from __future__ import annotations

import asyncio
import os
import shutil
import signal
import subprocess
import sys
import time
from collections.abc import AsyncIterator

import httpx2
import pytest

from runner import McpPool, Sandbox, ServerSpec
from runner.mcp_client.pool import CallTimedOut, ConnectionFailed, _rejected_unread, live_server_pids
from runner.sandbox import Profile

from . import EVERYTHING, ROOT, alive, children, killed, unique

NODE = shutil.which("node") or "node"


def everything(**kw: float) -> ServerSpec:
    return ServerSpec(
        ref="everything_test",
        key=unique("everything"),
        transport="stdio",
        argv=(NODE, str(EVERYTHING), "stdio"),
        env={"PATH": os.environ.get("PATH", "/usr/bin:/bin")},
        **kw,
    )


@pytest.fixture
async def pool() -> AsyncIterator[McpPool]:
    p = McpPool()
    yield p
    await p.aclose()


def pid_of(pool: McpPool, spec: ServerSpec) -> int:
    s = pool.session_for(spec.key)
    assert s is not None and s.pid is not None
    return s.pid


@pytest.mark.slow
async def test_the_first_call_connects_and_later_calls_reuse_the_session(pool: McpPool) -> None:
    spec = everything()
    result, facts = await pool.call_tool(spec, "echo", {"message": "hi"})
    assert result.content[0].text == "Echo: hi"  # type: ignore[union-attr]
    assert facts["connect_ms"] > 0
    pid = pid_of(pool, spec)
    _, facts = await pool.call_tool(spec, "echo", {"message": "again"})
    assert "connect_ms" not in facts and pid_of(pool, spec) == pid


@pytest.mark.slow
async def test_200_concurrent_calls_share_one_session_without_error(pool: McpPool) -> None:
    spec = everything()
    results = await asyncio.gather(*(pool.call_tool(spec, "echo", {"message": f"m{i}"}) for i in range(200)))
    assert [r.content[0].text for r, _ in results] == [f"Echo: m{i}" for i in range(200)]  # type: ignore[union-attr]
    assert len([p for p in live_server_pids() if p == pid_of(pool, spec)]) == 1


@pytest.mark.slow
async def test_a_killed_server_is_restarted_by_the_next_call(pool: McpPool) -> None:
    spec = everything()
    await pool.call_tool(spec, "echo", {"message": "before"})
    pid = await killed(pool, spec.key)
    result, facts = await pool.call_tool(spec, "echo", {"message": "after"})
    assert result.content[0].text == "Echo: after"  # type: ignore[union-attr]
    # its end was seen before anything was sent: a new session, not a failed attempt
    assert facts["attempts"] == 1 and "connect_ms" in facts and pid_of(pool, spec) != pid


LONG = "trigger-long-running-operation"


@pytest.mark.slow
async def test_a_call_cut_off_by_the_servers_death_is_not_repeated_unless_repeatable(pool: McpPool) -> None:
    """The request reached the server, which may have acted on it: sending it again could
    do the work twice. Only a repeatable call is retried; either way the next call works."""
    spec = everything()
    await pool.call_tool(spec, "echo", {"message": "warm"})

    async def kill_soon() -> None:
        await asyncio.sleep(0.5)
        await killed(pool, spec.key)

    killer = asyncio.create_task(kill_soon())
    started = time.monotonic()
    with pytest.raises(ConnectionFailed, match="may have run, so the call was not repeated") as refused:
        await pool.call_tool(spec, LONG, {"duration": 5, "steps": 5})
    await killer
    assert time.monotonic() - started < 4, "failed when the connection closed, not at the end of the operation"
    assert "idempotent" in (refused.value.hint or "")
    result, facts = await pool.call_tool(spec, "echo", {"message": "next"})
    assert result.content[0].text == "Echo: next" and "connect_ms" in facts  # type: ignore[union-attr]

    killer = asyncio.create_task(kill_soon())
    result, facts = await pool.call_tool(spec, LONG, {"duration": 1, "steps": 1}, repeatable=True)
    await killer
    assert not result.is_error and facts["attempts"] == 2


@pytest.mark.slow
async def test_a_tool_error_is_returned_once_and_not_retried(pool: McpPool) -> None:
    spec = everything()
    result, facts = await pool.call_tool(spec, "echo", {})
    assert result.is_error and facts["attempts"] == 1


@pytest.mark.slow
async def test_a_slow_call_times_out_without_retry_and_the_session_survives(pool: McpPool) -> None:
    spec = everything()
    await pool.call_tool(spec, "echo", {"message": "warm"})
    pid = pid_of(pool, spec)
    with pytest.raises(CallTimedOut):
        await pool.call_tool(spec, "trigger-long-running-operation", {"duration": 5, "steps": 1}, timeout_s=0.3)
    result, _ = await pool.call_tool(spec, "echo", {"message": "still here"})
    assert not result.is_error and pid_of(pool, spec) == pid


@pytest.mark.slow
async def test_an_idle_session_shuts_its_server_down(pool: McpPool) -> None:
    spec = everything(idle_shutdown_s=0.3)
    await pool.call_tool(spec, "echo", {"message": "hi"})
    pid = pid_of(pool, spec)
    deadline = time.monotonic() + 10
    while alive(pid) and time.monotonic() < deadline:
        await asyncio.sleep(0.1)
    assert not alive(pid) and pool.session_for(spec.key) is None
    result, facts = await pool.call_tool(spec, "echo", {"message": "back"})
    assert not result.is_error and "connect_ms" in facts


@pytest.mark.slow
async def test_a_server_slower_to_start_than_its_idle_shutdown_still_serves_its_first_call(pool: McpPool) -> None:
    """Idle time counts from when the session is ready, not from the spawn: a server (say,
    one starting in its sandbox) that takes longer to start than idle_shutdown_s is not
    closed before the call that started it is sent."""
    spec = everything(idle_shutdown_s=0.05)
    result, facts = await pool.call_tool(spec, "echo", {"message": "first"})
    assert result.content[0].text == "Echo: first"  # type: ignore[union-attr]
    assert facts["attempts"] == 1 and facts["connect_ms"] > 50


@pytest.mark.slow
async def test_aclose_leaves_no_server_process() -> None:
    pool = McpPool()
    specs = [everything(), everything()]
    for spec in specs:
        await pool.call_tool(spec, "echo", {"message": "hi"})
    pids = [pid_of(pool, spec) for spec in specs]
    assert all(alive(p) for p in pids)
    await pool.aclose()
    assert not any(alive(p) for p in pids)
    assert not set(pids) & live_server_pids()


@pytest.mark.slow
async def test_a_server_that_never_answers_fails_its_startup_timeout_and_is_killed(pool: McpPool) -> None:
    before = children()
    spec = ServerSpec(
        ref="mute",
        key=unique("mute"),
        transport="stdio",
        argv=("/bin/sleep", "30"),
        env={"PATH": "/usr/bin:/bin"},
        startup_timeout_s=0.3,
    )
    started = time.monotonic()
    with pytest.raises(ConnectionFailed, match=r"did not start within 0\.3 s"):
        await pool.call_tool(spec, "echo", {}, retries=1)
    assert time.monotonic() - started < 10
    await pool.aclose()  # waits for the sessions being discarded to finish closing
    assert children() <= before


@pytest.mark.slow
async def test_a_sandboxed_server_that_does_not_start_is_told_about_its_network(pool: McpPool) -> None:
    """A server that fetches its package (npx) hangs in a sandbox without that host: the startup
    error says the sandbox allows it no network, and where to grant it."""
    sandbox = Sandbox()
    try:
        spec = ServerSpec(
            ref="mute_sandboxed",
            key=unique("mute"),
            transport="stdio",
            argv=("/bin/sleep", "30"),
            env={"PATH": "/usr/bin:/bin"},
            startup_timeout_s=0.5,
            confiner=lambda: sandbox.confine(Profile(), [], "/tmp", os.environ, cgroup=False),
        )
        with pytest.raises(ConnectionFailed, match=r"did not start within 0\.5 s") as raised:
            await pool.call_tool(spec, "echo", {}, retries=1)
        hint = raised.value.hint or ""
        assert "sandbox" in hint and "(none)" in hint and "config.sandbox.network" in hint, hint
        unsandboxed = ServerSpec(
            ref="mute", key=unique("mute"), transport="stdio", argv=("/bin/sleep", "30"), startup_timeout_s=0.3
        )
        with pytest.raises(ConnectionFailed) as raised:
            await pool.call_tool(unsandboxed, "echo", {}, retries=1)
        assert "sandbox" not in (raised.value.hint or ""), "no sandbox, no word of one"
    finally:
        await pool.aclose()
        await sandbox.aclose()


async def test_a_server_that_exits_at_once_reports_its_stderr(pool: McpPool) -> None:
    spec = ServerSpec(
        ref="broken",
        key=unique("broken"),
        transport="stdio",
        argv=(NODE, "-e", "console.error('boom: no config'); process.exit(3)"),
        env={"PATH": os.environ.get("PATH", "/usr/bin:/bin")},
    )
    with pytest.raises(ConnectionFailed, match="boom: no config"):
        await pool.call_tool(spec, "echo", {}, retries=0)


_ORPHAN = """
import asyncio, os, sys, time
from runner.mcp_client.pool import McpPool, ServerSpec
async def main():
    pool = McpPool()
    spec = ServerSpec(ref="e", key="e", transport="stdio", argv=tuple(sys.argv[1:]), env={"PATH": os.environ["PATH"]})
    await pool.call_tool(spec, "echo", {"message": "hi"})
    print(pool.session_for("e").pid, flush=True)
    if os.environ.get("HANG"):
        time.sleep(60)  # blocks the loop: only the signal handler can act
asyncio.run(main())  # ends without pool.aclose(): atexit must clean up
"""


@pytest.mark.slow
@pytest.mark.parametrize("how", ["exit without aclose", "SIGTERM"])
def test_no_stdio_server_survives_the_kiwi_process(how: str) -> None:
    env = {**os.environ, "PYTHONPATH": str(ROOT), **({"HANG": "1"} if how == "SIGTERM" else {})}
    proc = subprocess.Popen(
        [sys.executable, "-c", _ORPHAN, NODE, str(EVERYTHING), "stdio"], env=env, stdout=subprocess.PIPE, text=True
    )
    assert proc.stdout is not None
    pid = int(proc.stdout.readline())
    if how == "SIGTERM":
        assert alive(pid)
        proc.send_signal(signal.SIGTERM)
    proc.wait(timeout=30)
    deadline = time.monotonic() + 5
    while alive(pid) and time.monotonic() < deadline:
        time.sleep(0.05)
    assert not alive(pid)


@pytest.mark.parametrize(
    ("body", "turned_away"),
    [
        (b'{"jsonrpc":"2.0","error":{"code":-32000,"message":"Bad Request: No valid session ID provided"}}', True),
        (b'{"jsonrpc":"2.0","id":null,"error":{"code":-32000,"message":"unknown session"}}', True),
        (b'{"jsonrpc":"2.0","id":7,"error":{"code":-32602,"message":"Invalid params"}}', False),  # answers call 7
        (b"<html>Bad Request</html>", False),
        (b'["not", "an", "error"]', False),
    ],
)
async def test_only_a_400_for_no_request_counts_as_a_session_turned_away(body: bytes, turned_away: bool) -> None:
    """A 400 to a request that carried the session id means "not taken" only when the
    JSON-RPC error answers no request; the body stays readable for the SDK."""
    response = httpx2.Response(400, content=body)
    assert await _rejected_unread(response) is turned_away
    assert await response.aread() == body


@pytest.mark.slow
async def test_the_tracked_pid_is_the_spawned_server_not_a_look_alike_that_was_there_before(pool: McpPool) -> None:
    """Regression: the runner adopts tools' orphaned daemons (it is their subreaper), and one
    that led its own group looked like the server the pool had just spawned, so the pool could
    track (and later kill) the wrong process. The pool now spawns the server itself."""
    spec = everything()
    look_alike = subprocess.Popen(list(spec.argv), stdin=subprocess.PIPE, start_new_session=True)
    try:
        await pool.call_tool(spec, "echo", {"message": "hi"})
        pid = pid_of(pool, spec)
        assert pid != look_alike.pid and look_alike.pid not in live_server_pids()
        with open(f"/proc/{pid}/cmdline", "rb") as f:
            assert f.read().split(b"\0")[:-1] == [a.encode() for a in spec.argv]
        assert os.getpgid(pid) == pid, "it leads its own process group: one killpg reaches all of it"
    finally:
        look_alike.kill()
        look_alike.wait()
