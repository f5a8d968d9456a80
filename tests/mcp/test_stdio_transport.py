"""The pool's stdio transport (runner/mcp_client/stdio.py) against real child processes: what
the server writes reaches the session in order and no faster than it is taken, what the
session sends reaches the server whole, and shutdown leaves no process behind."""

from __future__ import annotations

import asyncio
import json
import os
import sys
import tempfile
import time

import anyio
import mcp_types as types
import pytest
from mcp.shared.message import SessionMessage

from runner.mcp_client import stdio
from runner.mcp_client.stdio import stdio_connection

pytestmark = pytest.mark.slow  # real processes, some given seconds to exit


def python(code: str) -> list[str]:
    return [sys.executable, "-c", code]


def notification(n: int) -> str:
    return json.dumps({"jsonrpc": "2.0", "method": "notifications/message", "params": {"level": "info", "data": n}})


def gone(pid: int) -> bool:
    """Neither running nor a zombie: reaped."""
    return not os.path.exists(f"/proc/{pid}")


def dead(pid: int) -> bool:
    """No longer running (a zombie counts: a grandchild is reaped by whoever adopts it, which is
    this process when an earlier test made it a subreaper)."""
    try:
        with open(f"/proc/{pid}/stat", "rb") as f:
            stat = f.read()
    except OSError:
        return True
    return stat[stat.rfind(b")") + 2 :].split()[0] in (b"Z", b"X")


async def test_what_the_server_writes_arrives_in_order_and_reading_stops_while_it_is_not_taken() -> None:
    code = (
        "import json, sys, time;"
        "line = lambda n: json.dumps({'jsonrpc': '2.0', 'method': 'notifications/message', 'params': {'data': n}});"
        "sys.stdout.write(''.join(line(n) + '\\n' for n in range(2000))); sys.stdout.flush(); sys.stdin.read()"
    )
    with tempfile.TemporaryFile("w+") as errlog:
        async with stdio_connection(python(code), {}, None, errlog) as server:
            await asyncio.sleep(0.5)  # the server wrote everything; the session took nothing
            held = len(server.read._items)
            assert held < 2000, "the reader stopped once the session fell behind"
            got = [await server.read.receive() for _ in range(2000)]
    assert [m.message.params["data"] for m in got if isinstance(m, SessionMessage)] == list(range(2000))  # type: ignore[union-attr]


async def test_a_line_that_is_not_a_message_arrives_as_its_error_and_the_next_one_still_arrives() -> None:
    code = f"print('not json', flush=True); print({notification(7)!r}, flush=True); import sys; sys.stdin.read()"
    with tempfile.TemporaryFile("w+") as errlog:
        async with stdio_connection(python(code), {}, None, errlog) as server:
            first = await server.read.receive()
            second = await server.read.receive()
    assert isinstance(first, ValueError)
    assert isinstance(second, SessionMessage) and second.message.params["data"] == 7  # type: ignore[union-attr]


async def test_a_message_larger_than_the_pipe_reaches_a_slow_reader_whole() -> None:
    # the server reads slowly, then answers with the length of the line it read
    code = (
        "import sys, time, json; time.sleep(0.3); line = sys.stdin.readline();"
        "print(json.dumps({'jsonrpc': '2.0', 'method': 'n', 'params': {'size': len(line)}}), flush=True);"
        "sys.stdin.read()"
    )
    big = "x" * 500_000  # several times a pipe's buffer
    request = types.JSONRPCRequest(jsonrpc="2.0", id=1, method="tools/call", params={"name": "echo", "big": big})
    expected = len(request.model_dump_json(by_alias=True, exclude_unset=True)) + 1
    with tempfile.TemporaryFile("w+") as errlog:
        async with stdio_connection(python(code), {}, None, errlog) as server:
            await server.write.send(SessionMessage(request))
            answer = await server.read.receive()
    assert isinstance(answer, SessionMessage) and answer.message.params == {"size": expected}  # type: ignore[union-attr]


async def test_a_send_to_a_server_that_stopped_reading_says_the_connection_is_broken() -> None:
    code = "import os, time; os.close(0); print('{}', flush=True); time.sleep(30)"
    request = types.JSONRPCRequest(jsonrpc="2.0", id=1, method="ping")
    with tempfile.TemporaryFile("w+") as errlog:
        async with stdio_connection(python(code), {}, None, errlog) as server:
            await server.read.receive()  # its stdin is closed by now
            with pytest.raises(anyio.BrokenResourceError):
                await server.write.send(SessionMessage(request))


async def test_the_end_of_the_servers_output_ends_the_stream() -> None:
    with tempfile.TemporaryFile("w+") as errlog:
        async with stdio_connection(python(f"print({notification(1)!r})"), {}, None, errlog) as server:
            items = [item async for item in server.read]
            pid = server.pid
            with pytest.raises(anyio.EndOfStream):
                await server.read.receive()
    assert len(items) == 1 and gone(pid)


async def test_a_server_that_exits_when_its_stdin_closes_is_never_signalled() -> None:
    code = "import sys, signal; signal.signal(signal.SIGTERM, lambda *a: sys.exit(9)); sys.stdin.read()"
    with tempfile.TemporaryFile("w+") as errlog:
        started = time.monotonic()
        async with stdio_connection(python(code), {}, None, errlog) as server:
            await asyncio.sleep(0.2)
        took = time.monotonic() - started
    assert server._proc.returncode == 0 and took < stdio.PROCESS_TERMINATION_TIMEOUT


async def test_a_server_that_ignores_stdin_and_sigterm_is_killed_with_its_group(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    monkeypatch.setattr(stdio, "PROCESS_TERMINATION_TIMEOUT", 0.2)
    monkeypatch.setattr(stdio, "FORCE_KILL_TIMEOUT", 0.3)
    stubborn = "import signal, time; signal.signal(signal.SIGTERM, signal.SIG_IGN); time.sleep(60)"
    code = (
        f"import subprocess, sys; child = subprocess.Popen([sys.executable, '-c', {stubborn!r}]);"
        f"print(child.pid, file=sys.stderr, flush=True); {stubborn}"
    )
    with tempfile.TemporaryFile("w+") as errlog:
        async with stdio_connection(python(code), {}, None, errlog) as server:
            for _ in range(100):
                errlog.seek(0)
                if errlog.read().strip():
                    break
                await asyncio.sleep(0.05)
        errlog.seek(0)
        grandchild = int(errlog.read().strip())
    assert server._proc.returncode == -9 and gone(server.pid)
    for _ in range(100):
        if dead(grandchild):
            break
        await asyncio.sleep(0.05)
    assert dead(grandchild), "SIGKILL reached the whole process group"


async def test_a_cancelled_caller_still_stops_the_server() -> None:
    code = "import time; time.sleep(60)"
    pid = 0
    with tempfile.TemporaryFile("w+") as errlog:

        async def hold() -> None:
            nonlocal pid
            async with stdio_connection(python(code), {}, None, errlog) as server:
                pid = server.pid
                await asyncio.sleep(60)

        task = asyncio.create_task(hold())
        await asyncio.sleep(0.3)
        task.cancel()
        with pytest.raises(asyncio.CancelledError):
            await task
    assert pid and gone(pid)
