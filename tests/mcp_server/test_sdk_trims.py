"""The SDK's per-call work Kiwi's server leaves out (runner/mcp_server/sdk_trims.py): the
`Mcp-Param-*` header walk of schemas that declare no `x-mcp-header`, and the SDK's span when
telemetry is off. What a caller can observe must not change: a schema that does declare the
annotation is still checked, Kiwi's tools still answer."""

from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path
from typing import Any

import pytest
from mcp import Client
from mcp.server._otel import OpenTelemetryMiddleware
from mcp.server.mcpserver import MCPServer
from mcp.shared.inbound import validate_mcp_param_headers

from runner.mcp_server.sdk_trims import names_header_annotation, only_annotated

PLAIN: dict[str, Any] = {"type": "object", "properties": {"region": {"type": "string"}}}
ROOT = Path(__file__).resolve().parents[2]
ANNOTATED: dict[str, Any] = {
    "type": "object",
    "properties": {"region": {"type": "string", "x-mcp-header": "Region"}},
}


def test_a_schema_that_declares_a_header_is_still_checked_by_the_sdk() -> None:
    lookup = only_annotated({"plain": PLAIN, "annotated": ANNOTATED}.get)
    schema = lookup("annotated")
    assert schema is ANNOTATED
    # what the SDK then does with it: a header that contradicts the argument is refused
    refused = validate_mcp_param_headers(schema, {"region": "eu"}, {"mcp-param-region": "us"})
    assert refused is not None and "does not match" in refused.message
    assert validate_mcp_param_headers(schema, {"region": "eu"}, {"mcp-param-region": "eu"}) is None


def test_a_schema_that_declares_none_is_not_walked_and_could_refuse_nothing() -> None:
    lookup = only_annotated({"plain": PLAIN}.get)
    assert lookup("plain") is None
    # the SDK's own check of that schema refuses nothing, whatever the headers say
    assert validate_mcp_param_headers(PLAIN, {"region": "eu"}, {"mcp-param-region": "us"}) is None


def test_a_tool_replaced_under_its_name_is_looked_at_again_and_unknown_names_are_not_kept() -> None:
    tools: dict[str, dict[str, Any]] = {"t": PLAIN}
    lookup = only_annotated(tools.get)
    assert lookup("t") is None
    tools["t"] = ANNOTATED
    assert lookup("t") is ANNOTATED
    assert lookup("nope") is None
    nested = {"$defs": {"Where": {"properties": {"zone": {"type": "string", "x-mcp-header": "Zone"}}}}}
    assert names_header_annotation(nested)  # anywhere in the schema, however deep
    assert names_header_annotation({"enum": ["x-mcp-header"]})  # a string that could be the key: checked


async def test_kiwis_tools_skip_the_walk_and_still_answer(server: MCPServer) -> None:
    low = server._lowlevel_server
    assert low.get_tool_input_schema is not None
    for name in ("search", "load", "execute", "help"):
        assert server._tool_manager.get_tool(name) is not None
        assert low.get_tool_input_schema(name) is None
    async with Client(server) as client:
        answer = await client.call_tool("help", {})
    assert not answer.is_error


def test_without_telemetry_the_sdk_builds_no_span_per_message(server: MCPServer) -> None:
    assert not any(isinstance(m, OpenTelemetryMiddleware) for m in server._lowlevel_server.middleware)
    assert server._lowlevel_server.middleware  # Kiwi's own middleware is still there


HOST_APP = """
import sys
from opentelemetry import trace
from opentelemetry.sdk.trace import TracerProvider
from mcp.server._otel import OpenTelemetryMiddleware
from mcp.server.mcpserver import MCPServer
from runner.mcp_server.sdk_trims import trim_per_call_work

if sys.argv[1] == "with":
    trace.set_tracer_provider(TracerProvider())  # a host application's own tracing
server = MCPServer("host")
trim_per_call_work(server)
print(any(isinstance(m, OpenTelemetryMiddleware) for m in server._lowlevel_server.middleware))
"""


@pytest.mark.slow
@pytest.mark.parametrize(("provider", "kept"), [("with", "True"), ("without", "False")])
def test_a_host_applications_tracer_provider_keeps_the_sdks_span(provider: str, kept: str) -> None:
    """Tracing is per process (its provider is global), so each case runs in a process of its own."""
    env = {k: v for k, v in os.environ.items() if not k.startswith("OTEL_")}
    done = subprocess.run(
        [sys.executable, "-c", HOST_APP, provider], env=env, capture_output=True, text=True, timeout=60, cwd=ROOT
    )
    assert done.returncode == 0, done.stderr
    assert done.stdout.strip() == kept
