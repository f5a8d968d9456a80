"""An approval-gated call made as an MCP task: its task is `input_required` while a person
decides; the policy's notifier tool tells someone (a local HTTP receiver, here); approving it
from the CLI (`kiwi --admin approve ID`) puts the run back on the queue by itself, and the task
completes without another call from the agent. Real `kiwi serve`, `kiwi worker` and `kiwi`
processes, the official SDK client, the real database, a real HTTP receiver."""

from __future__ import annotations

import asyncio
import json
import threading
import time
from collections.abc import Callable, Iterator
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from pathlib import Path
from typing import Any

import psycopg
import pytest

from runner.testing.http_serving import ROOT, kiwi_http_server, user_token
from tests.kiwi_cli import kiwi_env, run_kiwi
from tests.mcp_server.task_fleet import create_task, get_task, kiwi_worker, legacy_client, task_result, wait_for_status

pytestmark = pytest.mark.slow  # real kiwi worker (and kiwi serve) processes

RELATED = "io.modelcontextprotocol/related-task"


class Receiver:
    """A webhook that keeps what was posted to it."""

    def __init__(self) -> None:
        self.posts: list[dict[str, Any]] = []
        self.lock = threading.Lock()

    def wait(self, timeout_s: float = 60) -> dict[str, Any]:
        deadline = time.monotonic() + timeout_s
        while True:
            with self.lock:
                if self.posts:
                    return self.posts[0]
            assert time.monotonic() < deadline, "the notifier never posted"
            time.sleep(0.05)


@pytest.fixture
def receiver() -> Iterator[tuple[Receiver, str]]:
    kept = Receiver()

    class Handler(BaseHTTPRequestHandler):
        def do_POST(self) -> None:
            body = self.rfile.read(int(self.headers.get("Content-Length") or 0))
            with kept.lock:
                kept.posts.append(json.loads(body))
            self.send_response(200)
            self.send_header("Content-Type", "application/json")
            self.end_headers()
            self.wfile.write(b'{"ok": true}')

        def log_message(self, *args: object) -> None:
            pass

    server = ThreadingHTTPServer(("127.0.0.1", 0), Handler)
    thread = threading.Thread(target=server.serve_forever, daemon=True)
    thread.start()
    try:
        yield kept, f"http://127.0.0.1:{server.server_address[1]}/notify"
    finally:
        server.shutdown()
        server.server_close()


@pytest.fixture
def gated(
    publish_tool: Callable[..., str], conn: psycopg.Connection, receiver: tuple[Receiver, str]
) -> Iterator[tuple[str, str]]:
    """A script under an approval policy whose notifier is an api tool posting to the receiver."""
    _, url = receiver
    notifier = publish_tool(
        "approval_notifier",
        {
            "tool_type": "api",
            "executor": "http_client",
            "parameters": [
                {"name": "event", "type": "string", "required": True},
                {"name": "text", "type": "string", "required": True},
                {"name": "approval", "type": "object", "required": True},
            ],
            "config": {
                "method": "POST",
                "url": url,
                "headers": {"Content-Type": "application/json"},
                "body_template": {"event": "{event}", "text": "{text}", "approval": "{approval}"},
            },
        },
    )
    tool = publish_tool(
        "gated_deploy",
        {"tool_type": "script", "executor": "bash_runtime", "parameters": [{"name": "target", "type": "string"}]},
        {"run.sh": 'echo "deploying" >&2\nprintf \'{"deployed": "%s"}\\n\' "$KIWI_PARAM_TARGET"\n'},
        entrypoint="run.sh",
    )
    conn.execute(
        "insert into approval_policies (pattern, ttl_seconds, notifier) values (%s, 600, %s)", (tool, notifier)
    )
    try:
        yield tool, notifier
    finally:
        conn.execute("delete from approval_policies where pattern = %s", (tool,))
        conn.execute("delete from approvals where tool_id = %s", (tool,))


def approve_from_the_cli(database_url: str, approval_id: str, cache: Path) -> str:
    done = run_kiwi(["--admin", "approve", approval_id], cwd=ROOT, env=kiwi_env(database_url, cache))
    assert done.code == 0, done.err
    return done.out


async def test_an_approved_task_completes_without_another_call_and_its_notifier_was_heard(
    database_url: str,
    conn: psycopg.Connection,
    gated: tuple[str, str],
    receiver: tuple[Receiver, str],
    tmp_path: Path,
) -> None:
    tool, _ = gated
    heard, _ = receiver
    with kiwi_http_server(database_url, tmp_path / "serve") as served, kiwi_worker(database_url, tmp_path / "worker"):
        async with legacy_client(served.url, user_token()) as agent:
            created = await create_task(agent, {"action": "run", "item_id": tool, "parameters": {"target": "prod"}})
            task_id = created.task.task_id
            assert created.task.status == "working"

            waiting = await wait_for_status(agent, task_id, "input_required")
            notice = await asyncio.to_thread(heard.wait)  # the notifier ran, queued as an admin
            approval = notice["approval"]
            assert notice["event"] == "approval_requested" and approval["tool_id"] == tool
            assert f"kiwi approve {approval['id']}" in notice["text"]
            assert f"kiwi approve {approval['id']}" in (waiting.status_message or "")

            # the agent waits for the answer (the specification's advice for input_required) ...
            answer = asyncio.create_task(task_result(agent, task_id))
            await asyncio.sleep(0.5)
            assert not answer.done()
            # ... and a person approves from the CLI: no further call from the agent
            await asyncio.to_thread(approve_from_the_cli, database_url, approval["id"], tmp_path / "cli")
            result = await asyncio.wait_for(answer, timeout=60)

            assert not result.is_error, result.content
            assert result.structured_content is not None
            assert result.structured_content["output"] == {"deployed": "prod"}
            assert result.meta is not None and result.meta[RELATED] == {"taskId": task_id}
            assert (await get_task(agent, task_id)).status == "completed"

    said = [
        r[0] for r in conn.execute("select message from queued_run_events where run_id = %s order by id", (task_id,))
    ]
    assert any(m.startswith("waiting for approval") for m in said) and any(m.startswith("approved by") for m in said)
