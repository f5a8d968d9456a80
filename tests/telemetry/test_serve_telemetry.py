"""What an operator of `kiwi serve --transport http` sees: a trace per MCP request received by a
real OTLP receiver, continuing the client's trace; /metrics counting the runs; /healthz and
/readyz without a token; one JSON log line per request and per refusal, never with the token.

Real parts only: the server is a real process on the local stack's database, the client the
official MCP SDK, the receiver a real OTLP/HTTP endpoint (runner/testing/otlp_receiver.py).
"""

from __future__ import annotations

import asyncio
import json
import os
import secrets
import subprocess
import sys
from collections.abc import Iterator
from pathlib import Path

import httpx
import pytest
from prometheus_client.parser import text_string_to_metric_families

from runner.testing.http_serving import ROOT, Served, free_port, kiwi_http_server, mcp_client, user_token
from runner.testing.otlp_receiver import OtlpReceiver, Received, otlp_receiver

pytestmark = pytest.mark.slow

TOOL = "hello_world"
SECRET_NAME = "Zanzibar-9f3c"  # a parameter value: never an attribute of a span
CHILDREN = ("kiwi.plan", "kiwi.gate", "kiwi.materialise", "kiwi.environment", "kiwi.process", "kiwi.record")
COVERED = {"tools/call execute", "kiwi.run", *CHILDREN}


@pytest.fixture(scope="module")
def receiver() -> Iterator[OtlpReceiver]:
    with otlp_receiver() as r:
        yield r


@pytest.fixture(scope="module")
def served(database_url: str, receiver: OtlpReceiver, tmp_path_factory: pytest.TempPathFactory) -> Iterator[Served]:
    env = {
        "OTEL_EXPORTER_OTLP_ENDPOINT": receiver.endpoint,
        "OTEL_SERVICE_NAME": "kiwi-under-test",
        "OTEL_BSP_SCHEDULE_DELAY": "100",
        "OTEL_METRIC_EXPORT_INTERVAL": "500",
    }
    with kiwi_http_server(database_url, tmp_path_factory.mktemp("serve-otel"), **env) as s:
        yield s


def _ancestors(span: Received, spans: list[Received]) -> list[str]:
    by_id = {s.span_id: s for s in spans}
    chain, at = [], span
    while at.parent_id in by_id:
        at = by_id[at.parent_id]
        chain.append(at.name)
    chain.append(at.parent_id)  # the first parent not in the trace: the client's span
    return chain


async def test_one_execute_is_one_trace_continuing_the_clients(served: Served, receiver: OtlpReceiver) -> None:
    trace_id, client_span = secrets.token_hex(16), secrets.token_hex(8)
    async with mcp_client(served.url, user_token()) as client:
        ran = await client.call_tool(
            "execute",
            {"action": "run", "item_id": TOOL, "parameters": {"name": SECRET_NAME}},
            meta={"traceparent": f"00-{trace_id}-{client_span}-01"},
        )
    assert not ran.is_error, ran.content
    spans = receiver.wait_for(trace_id, COVERED)
    names = {s.name for s in spans}
    assert names >= COVERED, names
    assert {s.service for s in spans} == {"kiwi-under-test"}
    request = next(s for s in spans if s.name == "tools/call execute")
    assert request.parent_id == client_span, "the request continues the client's span"
    run = next(s for s in spans if s.name == "kiwi.run")
    assert _ancestors(run, spans) == ["tools/call execute", client_span]
    for child in CHILDREN:
        assert _ancestors(next(s for s in spans if s.name == child), spans)[0] == "kiwi.run", child
    assert run.attributes["kiwi.tool.id"] == TOOL
    assert run.attributes["kiwi.tool.version"] == "1.0.0"
    assert len(run.attributes["kiwi.tool.content_hash"]) >= 32
    assert run.attributes["kiwi.status"] == "success"
    every_value = json.dumps([s.attributes for s in spans])
    assert SECRET_NAME not in every_value, "parameters never become attributes"


async def test_metrics_parse_and_count_the_runs(served: Served, receiver: OtlpReceiver) -> None:
    def runs() -> float:
        page = httpx.get(served.base + "/metrics", timeout=30)
        assert page.status_code == 200
        families = {f.name: f for f in text_string_to_metric_families(page.text)}
        assert "kiwi_queue_depth" in families and "kiwi_run_duration_seconds" in families
        pool = {s.labels["state"]: s.value for s in families["kiwi_db_pool_connections"].samples}
        assert set(pool) == {"open", "idle", "waiting"} and pool["open"] >= 1, pool  # the server's own reads
        return sum(
            s.value
            for s in families["kiwi_runs"].samples
            if s.name == "kiwi_runs_total" and s.labels == {"tool": TOOL, "status": "success"}
        )

    before = runs()
    async with mcp_client(served.url, user_token()) as client:
        for n in range(3):
            ran = await client.call_tool("execute", {"action": "run", "item_id": TOOL, "parameters": {"name": f"n{n}"}})
            assert not ran.is_error, ran.content
    assert runs() == before + 3
    exported = {"kiwi.runs", "kiwi.run.duration", "kiwi.db.pool.connections"}
    for _ in range(50):  # and as OpenTelemetry metrics, over OTLP
        if exported <= receiver.metrics:
            break
        await asyncio.sleep(0.1)
    assert exported <= receiver.metrics, receiver.metrics


def test_health_and_readiness_need_no_token(served: Served) -> None:
    health = httpx.get(served.base + "/healthz", timeout=30)
    assert health.status_code == 200 and health.json() == {"status": "up"}
    ready = httpx.get(served.base + "/readyz", timeout=30)
    assert ready.status_code == 200, ready.text
    assert ready.json() == {"status": "ready", "database": "ok", "schema": "current"}


def test_a_refusal_is_logged_with_why_and_never_the_token(served: Served) -> None:
    forged = user_token(secret="not-the-projects-secret-" + secrets.token_hex(8))
    refused = httpx.post(served.url, json={}, headers={"Authorization": f"Bearer {forged}"}, timeout=30)
    assert refused.status_code == 401
    ok = httpx.get(served.base + "/healthz", timeout=30)
    assert ok.status_code == 200
    lines = [json.loads(line) for line in served.stderr().splitlines() if line.startswith("{")]
    assert forged not in served.stderr() and forged.split(".")[1] not in served.stderr()
    refusals = [x for x in lines if x["event"] == "http_refused" and x["path"] == "/mcp" and x["status"] == 401]
    assert refusals and refusals[-1]["reason"] and refusals[-1]["principal"] is None
    requests = [x for x in lines if x["event"] == "http_request"]
    assert any(x["path"] == "/healthz" and x["status"] == 200 for x in requests)
    served_calls = [x for x in requests if x["path"] == "/mcp" and x["status"] == 200]
    assert served_calls and all(x["principal"] for x in served_calls), "a served call names its principal"
    assert {"method", "duration_ms", "client"} <= set(requests[-1])


def test_readiness_fails_when_the_database_does_not_answer(tmp_path: Path) -> None:
    nowhere = f"postgresql://postgres:postgres@127.0.0.1:{free_port()}/postgres"
    with kiwi_http_server(nowhere, tmp_path / "serve") as down:
        assert httpx.get(down.base + "/healthz", timeout=30).status_code == 200
        ready = httpx.get(down.base + "/readyz", timeout=30)
        assert ready.status_code == 503 and ready.json()["status"] == "not ready", ready.text


def test_a_shared_gauges_label_that_went_away_reads_zero_not_its_last_value(tmp_path: Path) -> None:
    """Under --processes the gauges live in files that keep every value written: a queue status
    (or a pool state) no longer seen must read 0, not what it last was. In a process of its own,
    as prometheus_client picks its multiprocess values when it is imported."""
    probe = """
import runner.telemetry as t
from runner.telemetry.prometheus import PrometheusSink
depth = {"queued": 2.0, "retrying": 3.0}
t.set_gauge_source("kiwi.queue.depth", lambda: depth)
sink = PrometheusSink()
sink.render()
depth.pop("retrying")
print(sink.render().decode())
"""
    env = {**os.environ, "PROMETHEUS_MULTIPROC_DIR": str(tmp_path)}
    done = subprocess.run([sys.executable, "-c", probe], env=env, capture_output=True, text=True, cwd=ROOT, timeout=60)
    assert done.returncode == 0, done.stderr
    lines = done.stdout.splitlines()
    assert 'kiwi_queue_depth{status="queued"} 2.0' in lines
    assert 'kiwi_queue_depth{status="retrying"} 0.0' in lines, done.stdout
