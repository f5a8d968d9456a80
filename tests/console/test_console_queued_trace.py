"""A queued run's trace, end to end: `kiwi queue` puts a run on the queue, a real `kiwi worker`
with telemetry on (OTEL_* pointing at a real OTLP receiver, runner/testing/otlp_receiver.py)
runs it; its run record keeps the trace id the worker's spans were exported under, and the
console's page of the queued run shows it."""

from __future__ import annotations

import re
from collections.abc import Callable
from pathlib import Path

import httpx
import psycopg
import pytest

from runner.testing.otlp_receiver import otlp_receiver
from tests.conftest import ROOT
from tests.console.conftest import sign_in
from tests.fleet.workers import start_worker, stop
from tests.kiwi_cli import kiwi_env, run_kiwi

pytestmark = pytest.mark.slow

Browse = Callable[[], httpx.AsyncClient]


async def test_a_queued_runs_trace_is_recorded_and_shown(
    browse: Browse, database_url: str, conn: psycopg.Connection, tmp_path: Path
) -> None:
    with otlp_receiver() as receiver:
        telemetry = {"OTEL_EXPORTER_OTLP_ENDPOINT": receiver.endpoint, "OTEL_SERVICE_NAME": "kiwi-worker"}
        worker = start_worker(database_url, tmp_path, "--poll", "1", log=tmp_path / "worker.log", env=telemetry)
        try:
            env = kiwi_env(database_url, tmp_path)
            traces = []
            for name in ("Ada", "Grace"):  # two runs of one worker: a trace each, never one shared
                done = run_kiwi(["queue", "hello_world", "-p", f"name={name}", "--wait", "--json"], cwd=ROOT, env=env)
                assert done.code == 0, done.err + (tmp_path / "worker.log").read_text()
                run_id = str(done.json()["id"])
                row = conn.execute("select trace_id, status from tool_runs where id = %s", (run_id,)).fetchone()
                assert row is not None, "the queued run has its run record, under the queued run's id"
                assert row[1] == "success" and re.fullmatch(r"[0-9a-f]{32}", row[0] or ""), row
                traces.append(row[0])
            assert traces[0] != traces[1]
            trace_id = traces[1]
            spans = receiver.wait_for(trace_id, {"kiwi.run"})
        finally:
            stop(worker)
    run_span = next(s for s in spans if s.name == "kiwi.run")
    assert run_span.attributes["kiwi.tool.id"] == "hello_world"
    async with browse() as client:
        await sign_in(client)
        page = await client.get(f"/console/queued/{run_id}")
    assert page.status_code == 200, page.text
    assert f'id="queued-trace">{trace_id}<' in page.text
