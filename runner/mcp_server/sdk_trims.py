"""Work the MCP SDK does on every call that Kiwi's server has no use for, left out.

* **`Mcp-Param-*` header checks for schemas that declare none.** On every `tools/call` over
  streamable HTTP the SDK walks the called tool's whole input schema for `x-mcp-header`
  annotations (a parameter an intermediary may route on, whose header must then match the
  argument), twice: once to reject invalid annotations, once to compare. A schema whose JSON
  never names the annotation cannot hold one, so the SDK is told that tool has no schema to
  check, worked out once per schema instead of on every call; a tool that names it keeps the
  SDK's check exactly as it was.
* **The SDK's OpenTelemetry span per message when nothing records it.** With no tracer
  provider installed (neither Kiwi's telemetry, runner/telemetry, nor a host application's)
  the span records nothing, yet it is built (attributes, context extraction) on every message.
  With a provider, it stays: the MCP span is the parent of Kiwi's own. Decided when the server
  is built (`kiwi serve` starts telemetry first).
"""

from __future__ import annotations

import json
from collections.abc import Callable, Mapping
from typing import Any

from mcp.server._otel import OpenTelemetryMiddleware
from mcp.server.mcpserver import MCPServer
from mcp.shared.inbound import X_MCP_HEADER_KEY
from opentelemetry import trace

from .. import telemetry

__all__ = ["only_annotated", "trim_per_call_work"]

SchemaLookup = Callable[[str], Mapping[str, Any] | None]


def trim_per_call_work(server: MCPServer) -> None:
    """Both trims above, on a built server."""
    low = server._lowlevel_server  # the SDK's MCPServer has no public seam for either
    if low.get_tool_input_schema is not None:
        low.get_tool_input_schema = only_annotated(low.get_tool_input_schema)
    if not telemetry.started() and isinstance(trace.get_tracer_provider(), trace.ProxyTracerProvider):
        low.middleware[:] = [m for m in low.middleware if not isinstance(m, OpenTelemetryMiddleware)]


def only_annotated(lookup: SchemaLookup) -> SchemaLookup:
    """`lookup`, answering None (nothing to check) for a schema that names no `x-mcp-header`.
    What it learnt is kept per tool name while the tool's schema is the same object (a tool
    replaced under its name is looked at again); unknown names are never kept."""
    seen: dict[str, tuple[Mapping[str, Any], bool]] = {}

    def annotated(name: str) -> Mapping[str, Any] | None:
        schema = lookup(name)
        if schema is None:
            return None
        known = seen.get(name)
        if known is None or known[0] is not schema:
            known = (schema, names_header_annotation(schema))
            seen[name] = known
        return schema if known[1] else None

    return annotated


def names_header_annotation(schema: Mapping[str, Any]) -> bool:
    """Whether the annotation's key appears anywhere in the schema's JSON, at any depth (as a key
    or as a string equal to it: in doubt, the SDK checks)."""
    return json.dumps(X_MCP_HEADER_KEY) in json.dumps(schema, default=str)
