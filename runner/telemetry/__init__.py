"""Telemetry: traces and metrics, configured only by the standard OTEL_* variables.

Off unless an exporter is named (OTEL_EXPORTER_OTLP_ENDPOINT, OTEL_EXPORTER_OTLP_TRACES_ENDPOINT,
OTEL_EXPORTER_OTLP_METRICS_ENDPOINT, or OTEL_TRACES_EXPORTER / OTEL_METRICS_EXPORTER other than
`none`), and always off with OTEL_SDK_DISABLED=true. Off, nothing of OpenTelemetry is imported:
`span()` hands back one shared do-nothing context and the metric calls loop over no sinks, so a
`kiwi run` pays one look at the environment (tests/test_cli_startup.py, bench/telemetry_bench.py).

On (`start()`, at the entry points: `kiwi serve`, `kiwi run`, `kiwi worker`), the SDK exports
spans and metrics over OTLP/HTTP (otel.py), the psycopg and httpx instrumentations are on, and
the MCP SDK's own spans (each request, continuing the `_meta` traceparent a client sends; each
call to another server, passing it on) join the same provider.

Metrics go to every sink registered: OpenTelemetry's (when on) and the Prometheus registry that
`kiwi serve --transport http` serves at /metrics (prometheus.py), whether telemetry is on or not.
Attributes name a tool, its version and content hash: never parameters, outputs or secrets.
"""

from __future__ import annotations

import os
from collections.abc import Callable, Mapping
from contextlib import AbstractContextManager, nullcontext
from typing import Any, Protocol

__all__ = [
    "MetricSink",
    "add_sink",
    "configured",
    "continued",
    "count_refusal",
    "count_run",
    "describe",
    "gauges",
    "inject",
    "set_gauge_source",
    "span",
    "start",
    "started",
    "trace_id",
    "traceparent",
]

EXPORTER_ENDPOINTS = (
    "OTEL_EXPORTER_OTLP_ENDPOINT",
    "OTEL_EXPORTER_OTLP_TRACES_ENDPOINT",
    "OTEL_EXPORTER_OTLP_METRICS_ENDPOINT",
)
EXPORTER_CHOICES = ("OTEL_TRACES_EXPORTER", "OTEL_METRICS_EXPORTER")


class MetricSink(Protocol):
    """Where the runs' counts go (OpenTelemetry's meter, the Prometheus registry)."""

    def run(self, tool: str, status: str, seconds: float) -> None: ...

    def refusal(self, tool: str, kind: str) -> None: ...


_NOTHING: AbstractContextManager[Any] = nullcontext()
_tracer: Any = None  # OpenTelemetry's tracer once start() ran; None: every span() is _NOTHING
_sinks: list[MetricSink] = []
_gauge_sources: dict[str, Callable[[], Mapping[str, float]]] = {}


def configured(environ: Mapping[str, str] | None = None) -> bool:
    """Whether the OTEL_* variables ask for telemetry (see the module docstring)."""
    env = os.environ if environ is None else environ
    if env.get("OTEL_SDK_DISABLED", "").strip().lower() == "true":
        return False
    if any(env.get(name, "").strip() for name in EXPORTER_ENDPOINTS):
        return True
    return any(env.get(name, "none").strip().lower() not in ("", "none") for name in EXPORTER_CHOICES)


def started() -> bool:
    return _tracer is not None


def start(environ: Mapping[str, str] | None = None) -> bool:
    """Start the SDK when the environment asks for it (once a process); True when it runs."""
    global _tracer
    if _tracer is not None:
        return True
    if not configured(environ):
        return False
    from . import otel  # the SDK, only now

    _tracer = otel.start()
    return True


def span(name: str, attributes: Mapping[str, Any] | None = None) -> AbstractContextManager[Any]:
    """A span as the current one for the block (its parent: the current span), or nothing."""
    if _tracer is None:
        return _NOTHING
    return _tracer.start_as_current_span(
        name, attributes={k: v for k, v in (attributes or {}).items() if v is not None}
    )


def trace_id() -> str | None:
    """The current span's trace id as 32 lower-case hex digits (W3C), or None: telemetry off,
    or no span is current."""
    if _tracer is None:
        return None
    from opentelemetry import trace

    context = trace.get_current_span().get_span_context()
    return format(context.trace_id, "032x") if context.is_valid else None


# what a handler's span is called: the sandboxed process, the HTTP call, the other MCP server's tool
HANDLER_SPANS = {"subprocess": "kiwi.process", "http_client": "kiwi.http", "mcp_tool": "kiwi.mcp_tool"}


def describe(span: Any, plan: Any, status: str) -> None:
    """Name on a run's span the tool it ran: id, version, content hash and how it ended (never
    its parameters); nothing when there is no span (telemetry off) or no plan was found."""
    if span is None:
        return
    span.set_attribute("kiwi.status", status)
    if plan is not None:
        span.set_attributes(
            {
                "kiwi.tool.id": plan.tool_id,
                "kiwi.tool.version": plan.version or "",
                "kiwi.tool.content_hash": plan.content_hash or "",
                "kiwi.tool.type": plan.tool_type or "",
            }
        )


def inject(headers: dict[str, str]) -> None:
    """The current trace context into outgoing HTTP headers (W3C traceparent), when telemetry is on."""
    if _tracer is None:
        return
    from opentelemetry.propagate import inject as inject_into

    inject_into(headers)


def traceparent() -> str | None:
    """The current trace context as a W3C traceparent, to hand to work done later elsewhere (a
    queued run's worker); None when telemetry is off or no span is current."""
    carrier: dict[str, str] = {}
    inject(carrier)
    return carrier.get("traceparent")


def continued(traceparent: str | None) -> AbstractContextManager[Any]:
    """The block runs in the trace a traceparent names (its spans are that context's children);
    nothing when telemetry is off or there is none."""
    if _tracer is None or not traceparent:
        return _NOTHING
    from opentelemetry import context
    from opentelemetry.propagate import extract

    return _Attached(context, extract({"traceparent": traceparent}))


class _Attached:
    def __init__(self, context: Any, ctx: Any) -> None:
        self._context, self._ctx, self._token = context, ctx, None

    def __enter__(self) -> None:
        self._token = self._context.attach(self._ctx)

    def __exit__(self, *exc: object) -> None:
        self._context.detach(self._token)


def add_sink(sink: MetricSink) -> None:
    if sink not in _sinks:
        _sinks.append(sink)


def count_run(tool: str, status: str, seconds: float) -> None:
    """A run ended: by its tool (namespace/tool_id) and status, with how long it took."""
    for sink in _sinks:
        sink.run(tool, status, seconds)


def count_refusal(tool: str, kind: str) -> None:
    """The gate refused a call (kind: permission_denied, rate_limited, approval_pending, ...)."""
    for sink in _sinks:
        sink.refusal(tool, kind)


def set_gauge_source(name: str, source: Callable[[], Mapping[str, float]]) -> None:
    """A gauge read when metrics are collected: `source()` gives its values by one label's value
    (queue depth by status; the MCP pool's live sessions under "")."""
    _gauge_sources[name] = source


def gauges() -> dict[str, dict[str, float]]:
    """Every gauge's values now; a source that fails gives none this time."""
    found: dict[str, dict[str, float]] = {}
    for name, source in list(_gauge_sources.items()):
        try:
            found[name] = dict(source())
        except Exception:  # a gauge is best effort: a scrape never fails for it
            found[name] = {}
    return found
