"""`kiwi serve --transport http --processes 2`: two real server processes on one port, under a
real supervisor, answering the official SDK client; any process answers any session; a killed
process is started again; SIGTERM to the supervisor leaves no process behind."""

from __future__ import annotations

import asyncio
import json
import os
import re
import shutil
import signal
import subprocess
import sys
import time
from collections.abc import Iterator
from pathlib import Path

import httpx
import pytest

from runner.mcp_server.http_routing import owner_of
from runner.testing.http_serving import ROOT, Served, kiwi_http_server, mcp_client, user_token

HEADERS = {"Accept": "application/json, text/event-stream", "Content-Type": "application/json"}
VERSION = "2025-06-18"
INITIALIZE = {
    "jsonrpc": "2.0",
    "id": 1,
    "method": "initialize",
    "params": {"protocolVersion": VERSION, "capabilities": {}, "clientInfo": {"name": "t", "version": "1"}},
}


@pytest.fixture(scope="module")
def served(database_url: str, tmp_path_factory: pytest.TempPathFactory) -> Iterator[Served]:
    with kiwi_http_server(database_url, tmp_path_factory.mktemp("procs"), "--processes", "2") as s:
        yield s


def children(served: Served) -> list[int]:
    """The pids the supervisor said it started (the latest line)."""
    found = re.findall(r"serving with 2 processes \(pids (\d+), (\d+)\)", served.stderr())
    assert found, served.stderr()
    return [int(p) for p in found[-1]]


def requests(served: Served) -> list[dict[str, object]]:
    lines = [json.loads(x) for x in served.stderr().splitlines() if x.startswith("{")]
    return [x for x in lines if x.get("event") == "http_request" and x.get("path") == "/mcp"]


def alive(pid: int) -> bool:
    """Running, not a zombie."""
    try:
        state = Path(f"/proc/{pid}/stat").read_text().rsplit(")", 1)[1].split()[0]
    except FileNotFoundError:
        return False
    return state != "Z"


def wait_for(condition: object, timeout_s: float = 90) -> None:
    deadline = time.monotonic() + timeout_s
    while not condition():  # type: ignore[operator]
        assert time.monotonic() < deadline, "timed out"
        time.sleep(0.1)


async def list_tools(url: str, token: str) -> list[str]:
    async with mcp_client(url, token) as client:
        return [t.name for t in (await client.list_tools()).tools]


def test_sdk_clients_are_served_by_both_processes(served: Served) -> None:
    token = user_token()
    before = len(requests(served))

    async def clients() -> list[list[str]]:
        return await asyncio.gather(*(list_tools(served.url, token) for _ in range(12)))

    for names in asyncio.run(clients()):
        assert {"search", "execute"} <= set(names)
    answered = {x["pid"] for x in requests(served)[before:] if x["client"] is not None and x["status"] == 200}
    assert answered == set(children(served)), "each of the two processes answered some of the SDK's requests"


def test_a_session_is_answered_by_either_process(served: Served) -> None:
    headers = {**HEADERS, "Authorization": f"Bearer {user_token()}"}
    opened = httpx.post(served.url, json=INITIALIZE, headers=headers, timeout=30)
    assert opened.status_code == 200, opened.text
    session = opened.headers["mcp-session-id"]
    assert re.fullmatch(r"[01]-[0-9a-f]{32}", session), session
    before = len(requests(served))
    ping = {"jsonrpc": "2.0", "id": 2, "method": "ping"}
    on_session = {**headers, "Mcp-Session-Id": session, "MCP-Protocol-Version": VERSION}
    for _ in range(16):  # each on a new connection, which Linux gives either process
        answer = httpx.post(served.url, json=ping, headers=on_session, timeout=30)
        assert answer.status_code == 200, answer.text
        assert '"result":{}' in answer.text.replace(" ", ""), answer.text
    seen = requests(served)[before:]
    arrived = {x["pid"] for x in seen if x["client"] is not None}
    assert arrived == set(children(served)), "the pings arrived at both processes"
    forwarded = [x for x in seen if x["client"] is None]
    assert forwarded and {x["pid"] for x in forwarded} == {children(served)[int(session[0])]}
    gone = {**on_session, "Mcp-Session-Id": "1-" + session[2:] if session[0] == "0" else "0-" + session[2:]}
    assert httpx.post(served.url, json=ping, headers=gone, timeout=30).status_code == 404


def test_a_sessions_event_stream_is_relayed_and_ends_with_its_client(served: Served) -> None:
    """GET streams of one session, each on a new connection, closed after its headers: a
    forwarded one that outlived its client would make the next GET a 409 (one stream a session)."""
    headers = {**HEADERS, "Authorization": f"Bearer {user_token()}"}
    session = httpx.post(served.url, json=INITIALIZE, headers=headers, timeout=30).headers["mcp-session-id"]
    on_session = {**headers, "Mcp-Session-Id": session, "MCP-Protocol-Version": VERSION}
    initialized = {"jsonrpc": "2.0", "method": "notifications/initialized"}
    assert httpx.post(served.url, json=initialized, headers=on_session, timeout=30).status_code == 202
    before = len(requests(served))
    for _ in range(10):
        with httpx.Client(timeout=30) as client:
            stream_headers = {**on_session, "Accept": "text/event-stream"}
            with client.stream("GET", served.url, headers=stream_headers) as stream:
                assert stream.status_code == 200 and stream.headers["content-type"].startswith("text/event-stream")
        time.sleep(0.3)  # the owner sees the hang-up
    wait_for(lambda: sum(x["method"] == "GET" and x["client"] is not None for x in requests(served)[before:]) == 10)
    gets = [x for x in requests(served)[before:] if x["method"] == "GET"]
    assert all(x["status"] == 200 for x in gets), gets
    assert any(x["client"] is None for x in gets), "some stream was forwarded to the session's process"


def runs_counted(text: str, tool: str = "hello_world") -> float:
    """kiwi_runs_total of a tool's successful runs in a /metrics page (0 when none yet)."""
    from prometheus_client.parser import text_string_to_metric_families

    return sum(
        sample.value
        for family in text_string_to_metric_families(text)
        for sample in family.samples
        if sample.name == "kiwi_runs_total" and sample.labels == {"tool": tool, "status": "success"}
    )


def scrapes(served: Served, times: int) -> list[tuple[float, int]]:
    """/metrics through the shared port, each on a new connection: the runs it counts, and the
    process that answered (the request log's pid)."""
    metrics = served.url.removesuffix("/mcp") + "/metrics"
    found = []
    for _ in range(times):
        answer = httpx.get(metrics, timeout=30)
        assert answer.status_code == 200, answer.text
        found.append(runs_counted(answer.text))
    lines = [json.loads(x) for x in served.stderr().splitlines() if x.startswith("{")]
    pids = [int(x["pid"]) for x in lines if x.get("event") == "http_request" and x.get("path") == "/metrics"]
    return list(zip(found, pids[-times:], strict=True))


async def _runs(served: Served, n: int) -> None:
    """n runs of hello_world, each from its own SDK client (its own connection)."""

    async def one() -> None:
        async with mcp_client(served.url, user_token()) as client:
            result = await client.call_tool("execute", {"action": "run", "item_id": "hello_world", "parameters": {}})
            assert not result.is_error, result

    await asyncio.gather(*(one() for _ in range(n)))


def test_metrics_count_every_processs_runs_whichever_answers(served: Served) -> None:
    """Regression: each process answered /metrics with its own counts, so successive scrapes
    through the shared port went up and down with the process the kernel picked."""
    before = scrapes(served, 8)
    assert len({count for count, _ in before}) == 1, before
    ran_before = len(requests(served))

    asyncio.run(_runs(served, 10))
    ran_by = {x["pid"] for x in requests(served)[ran_before:] if x["client"] is not None}
    assert ran_by == set(children(served)), "both processes ran some of the runs"
    after = scrapes(served, 12)
    assert {count for count, _ in after} == {before[0][0] + 10}, after
    assert {pid for _, pid in after} == set(children(served)), "each process answered some scrapes"


def test_a_killed_process_is_started_again_and_sigterm_leaves_none(database_url: str, tmp_path: Path) -> None:
    with kiwi_http_server(database_url, tmp_path / "procs", "--processes", "2") as served:
        _kill_one_then_the_supervisor(served)


def _kill_one_then_the_supervisor(served: Served) -> None:
    first, second = children(served)
    run_dir = _run_dir(first)
    assert (run_dir / "process-0.sock").exists()
    asyncio.run(_runs(served, 6))
    counted = {count for count, _ in scrapes(served, 6)}
    os.kill(second, signal.SIGKILL)
    wait_for(lambda: "process 1 started again" in served.stderr())
    replaced = int(re.findall(r"process 1 started again: pid (\d+)", served.stderr())[-1])
    assert replaced != second and alive(replaced) and alive(first)
    wait_for(lambda: asyncio.run(_serves_twice(served, replaced)))
    assert {count for count, _ in scrapes(served, 8)} == counted, "the killed process's runs still count"

    assert served.proc is not None
    os.kill(served.pid, signal.SIGTERM)
    assert served.proc.wait(timeout=60) == 0
    assert not any(alive(pid) for pid in (first, second, replaced)), "no process outlives its supervisor"
    assert not run_dir.exists(), "the run directory is removed"


async def _serves_twice(served: Served, pid: int) -> bool:
    """Whether the restarted process (pid) has answered an SDK client yet (a few clients a try)."""
    await asyncio.gather(*(list_tools(served.url, user_token()) for _ in range(4)))
    return any(x["pid"] == pid for x in requests(served))


def test_a_session_id_names_its_process_or_none() -> None:
    assert owner_of("1-" + "a" * 32, 2) == 1
    assert owner_of("0-" + "a" * 32, 2) == 0
    assert owner_of("2-" + "a" * 32, 2) is None  # no such process: answered here (404)
    assert owner_of("a" * 32, 2) is None and owner_of("-1-x", 2) is None and owner_of("99999-x", 10**6) is None


def test_processes_are_for_http_only() -> None:
    done = subprocess.run(
        [sys.executable, "-m", "runner.cli.serve", "--processes", "2"],
        cwd=ROOT,
        capture_output=True,
        text=True,
        timeout=60,
        stdin=subprocess.DEVNULL,
    )
    assert done.returncode == 2 and "--processes is for --transport http" in done.stderr, done.stderr


def test_no_process_outlives_a_killed_supervisor(database_url: str, tmp_path: Path) -> None:
    """SIGKILL leaves the supervisor no chance to stop them: the kernel tells each (PDEATHSIG)."""
    with kiwi_http_server(database_url, tmp_path / "procs", "--processes", "2") as served:
        pids = children(served)
        run_dir = _run_dir(pids[0])
        os.kill(served.pid, signal.SIGKILL)
        wait_for(lambda: not any(alive(pid) for pid in pids), 60)
        shutil.rmtree(run_dir)  # the supervisor's to remove, had it lived


def _run_dir(pid: int) -> Path:
    """The supervisor's run directory, as it told process `pid` (--process I:DIR)."""
    command = Path(f"/proc/{pid}/cmdline").read_bytes().split(b"\0")
    return Path(command[command.index(b"--process") + 1].decode().split(":", 1)[1])
