"""A call to another MCP server through Kiwi's pool carries the caller's trace on, in `_meta`.

The caller is a process of its own (telemetry is per process: the SDK's providers are global),
which starts telemetry as `kiwi` does, opens a span and calls a real stdio MCP server
(meta_echo_server.py) through McpPool; the server answers the traceparent it received.
"""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

import pytest

from runner.testing.otlp_receiver import otlp_receiver

pytestmark = pytest.mark.slow

HERE = Path(__file__).resolve().parent
ROOT = HERE.parent.parent

CALLER = f"""
import asyncio, json, sys
from runner import telemetry
from runner.mcp_client.pool import McpPool, ServerSpec

async def main():
    assert telemetry.start()
    pool = McpPool()
    spec = ServerSpec(ref="meta_echo", key="meta_echo", transport="stdio",
                      argv=(sys.executable, {str(HERE / "meta_echo_server.py")!r}), env={{"PATH": "/usr/bin:/bin"}})
    try:
        with telemetry.span("caller") as span:
            result, _ = await pool.call_tool(spec, "traceparent", {{}})
            trace_id = format(span.get_span_context().trace_id, "032x")
    finally:
        await pool.aclose()
    print(json.dumps({{"trace_id": trace_id, "sent": result.content[0].text}}))

asyncio.run(main())
"""


def test_a_call_through_the_pool_carries_the_trace_in_meta() -> None:
    with otlp_receiver() as receiver:
        env = {k: v for k, v in os.environ.items() if not k.startswith("OTEL_")}
        env.update(OTEL_EXPORTER_OTLP_ENDPOINT=receiver.endpoint, PYTHONPATH=str(ROOT))
        done = subprocess.run([sys.executable, "-c", CALLER], env=env, capture_output=True, text=True, timeout=60)
        assert done.returncode == 0, done.stderr
        said = json.loads(done.stdout.strip().splitlines()[-1])
        spans = receiver.wait_for(said["trace_id"], {"caller", "MCP send tools/call traceparent"})
    version, trace_id, parent, _ = said["sent"].split("-")
    assert version == "00" and trace_id == said["trace_id"], said
    send = next(s for s in spans if s.name == "MCP send tools/call traceparent")
    assert parent == send.span_id, "the server's parent is the pool's call"
