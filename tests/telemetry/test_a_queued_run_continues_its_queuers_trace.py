"""An MCP task's run happens later, on a worker, maybe on another machine: its spans still belong
to the trace of the request that queued it. The queued run keeps the W3C trace context it was
queued in (queued_runs.traceparent) and the worker's `kiwi.run` continues it, so a client's one
trace id finds the request, the run and everything under it.

A real `kiwi serve --transport http` and a real `kiwi worker`, both exporting to one real OTLP
receiver; the official SDK's client sends the traceparent in `_meta`."""

from __future__ import annotations

import secrets
from pathlib import Path

import psycopg
import pytest

from runner.testing.http_serving import kiwi_http_server, user_token
from runner.testing.otlp_receiver import otlp_receiver
from tests.mcp_server.task_fleet import create_task, kiwi_worker, legacy_client, task_result

pytestmark = pytest.mark.slow


async def test_a_tasks_run_on_a_worker_continues_the_clients_trace(
    database_url: str, conn: psycopg.Connection, tmp_path: Path
) -> None:
    trace_id, client_span = secrets.token_hex(16), secrets.token_hex(8)
    with otlp_receiver() as receiver:
        otel = {
            "OTEL_EXPORTER_OTLP_ENDPOINT": receiver.endpoint,
            "OTEL_BSP_SCHEDULE_DELAY": "100",
        }
        with (
            kiwi_http_server(database_url, tmp_path / "serve", OTEL_SERVICE_NAME="kiwi-serve", **otel) as served,
            kiwi_worker(database_url, tmp_path / "worker", env={**otel, "OTEL_SERVICE_NAME": "kiwi-worker"}),
        ):
            async with legacy_client(served.url, user_token()) as client:
                created = await create_task(
                    client,
                    {"action": "run", "item_id": "hello_world", "parameters": {"name": "Ada"}},
                    meta={"traceparent": f"00-{trace_id}-{client_span}-01"},
                )
                answer = await task_result(client, created.task.task_id)
            assert not answer.is_error, answer.content
            spans = receiver.wait_for(trace_id, {"tools/call execute", "kiwi.run", "kiwi.process"})
    by_name = {s.name: s for s in spans}
    assert by_name["tools/call execute"].service == "kiwi-serve"
    run = by_name.get("kiwi.run")
    assert run is not None, f"the worker's run is not in the client's trace: {sorted(by_name)}"
    assert run.service == "kiwi-worker"
    assert run.parent_id in {s.span_id for s in spans if s.service == "kiwi-serve"}, "its parent: the queuing request"
    row = conn.execute("select trace_id from tool_runs where id = %s", (created.task.task_id,)).fetchone()
    assert row == (trace_id,), "the run's record names the client's trace"
