"""A small OTLP/HTTP (protobuf) receiver: what a collector would get from Kiwi, for the tests and
the telemetry bench. It answers /v1/traces and /v1/metrics on a free loopback port and keeps the
spans it was sent (as `Received` rows) and the names of the metrics."""

from __future__ import annotations

import gzip
import threading
import time
from collections.abc import Iterator
from contextlib import contextmanager
from dataclasses import dataclass, field
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from typing import Any

from opentelemetry.proto.collector.metrics.v1.metrics_service_pb2 import (
    ExportMetricsServiceRequest,
    ExportMetricsServiceResponse,
)
from opentelemetry.proto.collector.trace.v1.trace_service_pb2 import (
    ExportTraceServiceRequest,
    ExportTraceServiceResponse,
)


@dataclass(frozen=True)
class Received:
    """One span as the receiver got it."""

    name: str
    trace_id: str
    span_id: str
    parent_id: str
    attributes: dict[str, Any]
    service: str


@dataclass
class OtlpReceiver:
    port: int = 0
    spans: list[Received] = field(default_factory=list)
    metrics: set[str] = field(default_factory=set)
    requests: int = 0
    lock: threading.Lock = field(default_factory=threading.Lock)

    @property
    def endpoint(self) -> str:
        return f"http://127.0.0.1:{self.port}"

    def take(self, body: bytes, path: str) -> bytes:
        with self.lock:
            self.requests += 1
        if path.endswith("/v1/traces"):
            traces = ExportTraceServiceRequest.FromString(body)
            found = [
                _received(span, _service(resource.resource.attributes))
                for resource in traces.resource_spans
                for scope in resource.scope_spans
                for span in scope.spans
            ]
            with self.lock:
                self.spans.extend(found)
            return ExportTraceServiceResponse().SerializeToString()
        if path.endswith("/v1/metrics"):
            sent = ExportMetricsServiceRequest.FromString(body)
            names = {m.name for r in sent.resource_metrics for s in r.scope_metrics for m in s.metrics}
            with self.lock:
                self.metrics |= names
            return ExportMetricsServiceResponse().SerializeToString()
        return b""

    def trace(self, trace_id: str) -> list[Received]:
        with self.lock:
            return [s for s in self.spans if s.trace_id == trace_id]

    def wait_for(self, trace_id: str, names: set[str], timeout_s: float = 20.0) -> list[Received]:
        """The trace's spans once every one of `names` has arrived (or what came, at the timeout)."""
        deadline = time.monotonic() + timeout_s
        while time.monotonic() < deadline:
            spans = self.trace(trace_id)
            if names <= {s.name for s in spans}:
                return spans
            time.sleep(0.1)
        return self.trace(trace_id)


def _value(v: Any) -> Any:
    kind = v.WhichOneof("value")
    return getattr(v, kind) if kind else None


def _service(attributes: Any) -> str:
    return next((str(_value(a.value)) for a in attributes if a.key == "service.name"), "")


def _received(span: Any, service: str) -> Received:
    return Received(
        name=span.name,
        trace_id=span.trace_id.hex(),
        span_id=span.span_id.hex(),
        parent_id=span.parent_span_id.hex(),
        attributes={a.key: _value(a.value) for a in span.attributes},
        service=service,
    )


@contextmanager
def otlp_receiver() -> Iterator[OtlpReceiver]:
    """A receiver listening until the block ends."""
    receiver = OtlpReceiver()

    class Handler(BaseHTTPRequestHandler):
        def do_POST(self) -> None:
            body = self.rfile.read(int(self.headers.get("content-length") or 0))
            if self.headers.get("content-encoding") == "gzip":
                body = gzip.decompress(body)
            answer = receiver.take(body, self.path)
            self.send_response(200)
            self.send_header("content-type", "application/x-protobuf")
            self.send_header("content-length", str(len(answer)))
            self.end_headers()
            self.wfile.write(answer)

        def log_message(self, format: str, *args: Any) -> None:
            return

    server = ThreadingHTTPServer(("127.0.0.1", 0), Handler)
    receiver.port = server.server_address[1]
    thread = threading.Thread(target=server.serve_forever, name="otlp-receiver", daemon=True)
    thread.start()
    try:
        yield receiver
    finally:
        server.shutdown()
        server.server_close()


def main() -> None:
    """`python -m runner.testing.otlp_receiver`: a receiver in a process of its own (as a
    collector is), for the telemetry bench. Prints its endpoint, serves until stdin closes, then
    prints how many spans it got."""
    import sys

    with otlp_receiver() as receiver:
        print(receiver.endpoint, flush=True)
        sys.stdin.read()
        with receiver.lock:
            print(len(receiver.spans), flush=True)


if __name__ == "__main__":
    main()
