"""`kiwi run` with telemetry on: its run is a trace, and an API tool's request carries it on
(a W3C traceparent header naming the run's trace); off, no such header is sent.

Real parts: `kiwi run` as a process on the local stack, the seeded http_echo tool posting to a
real local HTTP server, a real OTLP receiver (runner/testing/otlp_receiver.py).
"""

from __future__ import annotations

import json
import threading
from collections.abc import Iterator
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from pathlib import Path
from typing import Any, ClassVar

import psycopg
import pytest

from runner.testing.otlp_receiver import otlp_receiver
from tests.kiwi_cli import kiwi_env, run_kiwi

pytestmark = pytest.mark.slow


class Api(BaseHTTPRequestHandler):
    """An echo API that keeps the headers of what it was sent."""

    seen: ClassVar[list[dict[str, str]]] = []

    def do_POST(self) -> None:
        body = self.rfile.read(int(self.headers.get("Content-Length") or 0))
        Api.seen.append({k.lower(): v for k, v in self.headers.items()})
        answer = json.dumps({"json": json.loads(body or b"null")}).encode()
        self.send_response(200)
        self.send_header("Content-Type", "application/json")
        self.send_header("Content-Length", str(len(answer)))
        self.end_headers()
        self.wfile.write(answer)

    def log_message(self, *args: object) -> None:
        pass


@pytest.fixture
def api() -> Iterator[str]:
    server = ThreadingHTTPServer(("127.0.0.1", 0), Api)
    threading.Thread(target=server.serve_forever, daemon=True).start()
    Api.seen = []
    yield f"http://127.0.0.1:{server.server_port}/anything"
    server.shutdown()


def _run(database_url: str, tmp_path: Path, **env: Any) -> Any:
    done = run_kiwi(
        ["run", "http_echo", "-p", "message=hi", "--json"],
        cwd=tmp_path,
        env=kiwi_env(database_url, tmp_path / "cache", **env),
    )
    assert done.code == 0, done.err
    return done


def test_an_api_tools_request_carries_the_runs_trace(database_url: str, tmp_path: Path, api: str) -> None:
    with otlp_receiver() as receiver:
        _run(database_url, tmp_path, HTTP_ECHO_URL=api, OTEL_EXPORTER_OTLP_ENDPOINT=receiver.endpoint)
        traceparent = Api.seen[-1]["traceparent"]
        _, trace_id, parent, _ = traceparent.split("-")
        spans = receiver.wait_for(trace_id, {"kiwi.run", "kiwi.http"})
    by_name = {s.name: s for s in spans}
    assert by_name["kiwi.http"].span_id == parent, "the API's request is a child of the run's HTTP call"
    assert by_name["kiwi.http"].parent_id == by_name["kiwi.run"].span_id
    assert by_name["kiwi.run"].attributes["kiwi.tool.id"] == "http_echo"


def test_the_run_record_keeps_the_runs_trace_id(
    database_url: str, tmp_path: Path, api: str, conn: psycopg.Connection
) -> None:
    """The record names the trace the run was (so a run's page can show it); off, it names none."""
    with otlp_receiver() as receiver:
        _run(database_url, tmp_path, HTTP_ECHO_URL=api, OTEL_EXPORTER_OTLP_ENDPOINT=receiver.endpoint)
        trace_id = Api.seen[-1]["traceparent"].split("-")[1]
        receiver.wait_for(trace_id, {"kiwi.run", "kiwi.record"})
    rows = conn.execute("select tool_id, status from tool_runs where trace_id = %s", (trace_id,)).fetchall()
    assert rows == [("http_echo", "success")]
    before = conn.execute("select coalesce(max(started_at), '-infinity') from tool_runs").fetchone()
    _run(database_url, tmp_path, HTTP_ECHO_URL=api, OTEL_SDK_DISABLED="true")
    since = before[0] if before else None
    off = conn.execute("select trace_id from tool_runs where tool_id = 'http_echo' and started_at > %s", (since,))
    assert off.fetchall() == [(None,)]


def test_off_no_trace_header_is_sent(database_url: str, tmp_path: Path, api: str) -> None:
    _run(
        database_url,
        tmp_path,
        HTTP_ECHO_URL=api,
        OTEL_EXPORTER_OTLP_ENDPOINT="http://127.0.0.1:9",
        OTEL_SDK_DISABLED="true",
    )
    assert "traceparent" not in Api.seen[-1]
