"""Kiwi's stdio transport (runner/mcp_server/stdio.py): the wire read and written by the event loop.

While serving, nothing but the protocol reaches stdout: a handler's print and a child
process's output go to stderr. A message of any size is one line both ways. Once the client
closes stdin the server ends, and fd 1 is the wire again.
"""

from __future__ import annotations

import json
import subprocess
import sys
import textwrap
from pathlib import Path
from typing import Any

import pytest

ROOT = Path(__file__).resolve().parents[2]

SERVER = textwrap.dedent(
    """
    import asyncio, os, sys
    from mcp.server.mcpserver import MCPServer
    from runner.mcp_server.stdio import serve_stdio

    def shout(size: int) -> str:
        print("stray print from the handler", flush=True)
        os.system("echo stray output of a child")
        return "x" * size

    def echo(text: str) -> str:
        return text

    server = MCPServer("wire")
    server.add_tool(shout, name="shout")
    server.add_tool(echo, name="echo")
    asyncio.run(serve_stdio(server))
    os.write(1, b"fd 1 is the wire again\\n")
    """
)


def _messages(*calls: dict[str, Any]) -> bytes:
    init = {
        "jsonrpc": "2.0",
        "id": 0,
        "method": "initialize",
        "params": {"protocolVersion": "2025-06-18", "capabilities": {}, "clientInfo": {"name": "t", "version": "1"}},
    }
    lines = [init, {"jsonrpc": "2.0", "method": "notifications/initialized"}]
    lines += [
        {"jsonrpc": "2.0", "id": i, "method": "tools/call", "params": call} for i, call in enumerate(calls, start=1)
    ]
    return b"".join(json.dumps(m).encode() + b"\n" for m in lines)


def _serve(tmp_path: Path, stdin: bytes, answers: int) -> tuple[list[str], str, int]:
    """Send the messages, read stdout until `answers` answers came (EOF on stdin would cancel the
    calls still running), then close stdin: stdout's lines, stderr, the exit status."""
    script = tmp_path / "server.py"
    script.write_text(SERVER)
    err = tmp_path / "stderr"
    with err.open("wb") as errors:
        proc = subprocess.Popen(
            [sys.executable, str(script)],
            stdin=subprocess.PIPE,
            stdout=subprocess.PIPE,
            stderr=errors,
            cwd=ROOT,
            env={"PATH": "/usr/bin:/bin", "PYTHONPATH": str(ROOT)},
        )
        assert proc.stdin is not None and proc.stdout is not None
        try:
            proc.stdin.write(stdin)
            proc.stdin.flush()
            lines = []
            while sum(1 for line in lines if '"id"' in line) < answers + 1:  # and the initialize answer
                line = proc.stdout.readline()
                assert line, f"the server ended early: {err.read_text()[-2000:]}"
                lines.append(line.decode().rstrip("\n"))
            proc.stdin.close()
            lines += proc.stdout.read().decode().splitlines()
            status = proc.wait(timeout=60)
        finally:
            proc.kill()
    return lines, err.read_text(), status


@pytest.mark.slow
def test_only_the_protocol_reaches_stdout_and_fd_1_is_restored(tmp_path: Path) -> None:
    big = "é" * 300_000  # one line of 600 kB, well past asyncio's default line limit
    out, err, status = _serve(
        tmp_path,
        _messages({"name": "shout", "arguments": {"size": 5}}, {"name": "echo", "arguments": {"text": big}}),
        answers=2,
    )
    assert out[-1] == "fd 1 is the wire again", err[-2000:]
    answers = {m["id"]: m for m in map(json.loads, out[:-1])}  # every other line is a message
    assert answers[1]["result"]["content"][0]["text"] == "xxxxx"
    assert answers[2]["result"]["content"][0]["text"] == big
    assert "stray print from the handler" in err and "stray output of a child" in err
    assert status == 0
