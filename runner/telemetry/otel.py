"""The OpenTelemetry SDK, started from the standard OTEL_* variables (imported only when asked).

Traces and metrics leave over OTLP/HTTP (protobuf): OTEL_EXPORTER_OTLP_ENDPOINT and the
per-signal endpoints, headers, timeouts and OTEL_METRIC_EXPORT_INTERVAL are the exporter's own
reading of the environment. OTEL_TRACES_EXPORTER / OTEL_METRICS_EXPORTER choose `otlp` (the
default), `console` or `none`; OTEL_SERVICE_NAME and OTEL_RESOURCE_ATTRIBUTES name the process
(service.name defaults to `kiwi`). The providers flush and shut down when the process exits.
"""

from __future__ import annotations

import logging
import os
from collections.abc import Iterable
from typing import Any

from opentelemetry import metrics, trace
from opentelemetry.metrics import CallbackOptions, Observation
from opentelemetry.sdk.metrics import MeterProvider
from opentelemetry.sdk.metrics.export import MetricReader, PeriodicExportingMetricReader
from opentelemetry.sdk.resources import Resource
from opentelemetry.sdk.trace import TracerProvider
from opentelemetry.sdk.trace.export import BatchSpanProcessor

from . import add_sink, gauges

logger = logging.getLogger("kiwi.telemetry")

TRACER_NAME = "kiwi"
GAUGE_LABELS = {"kiwi.queue.depth": "status", "kiwi.mcp.pool.sessions": "server", "kiwi.db.pool.connections": "state"}


def _choice(name: str) -> str:
    return (os.environ.get(name) or "otlp").strip().lower()


def start() -> Any:
    """Set the global tracer and meter providers; the tracer Kiwi's spans come from."""
    resource = Resource.create({"service.name": os.environ.get("OTEL_SERVICE_NAME") or "kiwi"})
    if (os.environ.get("OTEL_EXPORTER_OTLP_PROTOCOL") or "http/protobuf") != "http/protobuf":
        logger.warning("OTEL_EXPORTER_OTLP_PROTOCOL: only http/protobuf is exported; using it")
    tracing = TracerProvider(resource=resource)
    if (kind := _choice("OTEL_TRACES_EXPORTER")) != "none":
        tracing.add_span_processor(BatchSpanProcessor(_span_exporter(kind)))
    trace.set_tracer_provider(tracing)
    readers: list[MetricReader] = []
    if (kind := _choice("OTEL_METRICS_EXPORTER")) != "none":
        readers.append(PeriodicExportingMetricReader(_metric_exporter(kind)))
    metrics.set_meter_provider(MeterProvider(resource=resource, metric_readers=readers))
    add_sink(_OtelSink())
    _instrument()
    return trace.get_tracer(TRACER_NAME)


def _span_exporter(kind: str) -> Any:
    if kind == "console":
        from opentelemetry.sdk.trace.export import ConsoleSpanExporter

        return ConsoleSpanExporter()
    from opentelemetry.exporter.otlp.proto.http.trace_exporter import OTLPSpanExporter

    return OTLPSpanExporter()


def _metric_exporter(kind: str) -> Any:
    if kind == "console":
        from opentelemetry.sdk.metrics.export import ConsoleMetricExporter

        return ConsoleMetricExporter()
    from opentelemetry.exporter.otlp.proto.http.metric_exporter import OTLPMetricExporter

    return OTLPMetricExporter()


def _instrument() -> None:
    """The maintained instrumentations: every statement to Postgres, every httpx request (with its
    traceparent header). The MCP SDK's client (httpx2) is not httpx: it carries the trace in `_meta`."""
    from opentelemetry.instrumentation.httpx import HTTPXClientInstrumentor
    from opentelemetry.instrumentation.psycopg import PsycopgInstrumentor

    PsycopgInstrumentor().instrument(enable_commenter=False, skip_dep_check=True)
    HTTPXClientInstrumentor().instrument()


class _OtelSink:
    """The runs' metrics as OpenTelemetry instruments."""

    def __init__(self) -> None:
        meter = metrics.get_meter(TRACER_NAME)
        self._runs = meter.create_counter("kiwi.runs", unit="{run}", description="Runs ended, by tool and status")
        self._duration = meter.create_histogram("kiwi.run.duration", unit="s", description="How long runs took")
        self._refusals = meter.create_counter(
            "kiwi.gate.refusals", unit="{call}", description="Calls the gate refused, by tool and kind"
        )
        for name, label in GAUGE_LABELS.items():
            meter.create_observable_gauge(name, callbacks=[_observer(name, label)])

    def run(self, tool: str, status: str, seconds: float) -> None:
        labels = {"kiwi.tool": tool, "kiwi.status": status}
        self._runs.add(1, labels)
        self._duration.record(seconds, labels)

    def refusal(self, tool: str, kind: str) -> None:
        self._refusals.add(1, {"kiwi.tool": tool, "kiwi.refusal": kind})


def _observer(name: str, label: str) -> Any:
    def observe(options: CallbackOptions) -> Iterable[Observation]:
        values = gauges().get(name, {})
        return [Observation(v, {label: k} if k else {}) for k, v in values.items()]

    return observe
