"""A server killed right after its reply loses neither the call's audit row nor its run record.

Both are written behind the reply (runner/harness/recorder.py), so they are on local disk
first (runner/harness/journal.py). A real `kiwi serve` over stdio runs hello_world once and is
SIGKILLed the moment the reply has been read, before its writer's gathering delay is over:
what Postgres holds at that moment is noted, never relied on. The journal is on disk; the
next server of the same registry (same cache directory) writes its records at start, without
being asked anything, each exactly once.
"""

from __future__ import annotations

import json
import os
import signal
import subprocess
import sys
import time
import uuid
from pathlib import Path
from typing import Any

import psycopg

from runner import LOCAL_OWNER_ID
from runner.core.records import params_digest
from runner.harness.journal import encode_line, key_file_in, load_key
from runner.testing.http_serving import stop
from tests.conftest import runner_url

ROOT = Path(__file__).resolve().parents[2]
TIMEOUT_S = 60


def _run(params: dict[str, Any]) -> dict[str, Any]:
    return {"name": "execute", "arguments": {"action": "run", "item_id": "hello_world", "parameters": params}}


def _env(database_url: str, cache: Path) -> dict[str, str]:
    env = {k: v for k, v in os.environ.items() if not k.startswith(("KIWI_", "SUPABASE_"))}
    return {**env, "KIWI_DATABASE_URL": runner_url(database_url), "KIWI_CACHE_DIR": str(cache), "PYTHONPATH": str(ROOT)}


class StdioServer:
    """`kiwi serve` over stdio, spoken to line by line (JSON-RPC), so its pid is ours to kill."""

    def __init__(self, database_url: str, cache: Path, log: Path) -> None:
        self._err = log.open("wb")
        self.proc = subprocess.Popen(
            [sys.executable, "-m", "runner.cli.serve", "--transport", "stdio"],
            cwd=ROOT,
            env=_env(database_url, cache),
            stdin=subprocess.PIPE,
            stdout=subprocess.PIPE,
            stderr=self._err,
        )
        self._next = 0

    def request(self, method: str, params: dict[str, Any]) -> dict[str, Any]:
        self._next += 1
        self._send({"jsonrpc": "2.0", "id": self._next, "method": method, "params": params})
        assert self.proc.stdout is not None
        while True:
            line = self.proc.stdout.readline()
            assert line, "the server closed its stdout"
            message = json.loads(line)
            if message.get("id") == self._next:
                return message

    def _send(self, message: dict[str, Any]) -> None:
        assert self.proc.stdin is not None
        self.proc.stdin.write(json.dumps(message).encode() + b"\n")
        self.proc.stdin.flush()

    def initialize(self) -> None:
        self.request(
            "initialize",
            {"protocolVersion": "2025-06-18", "capabilities": {}, "clientInfo": {"name": "crash-test", "version": "1"}},
        )
        self._send({"jsonrpc": "2.0", "method": "notifications/initialized"})

    def kill(self) -> None:
        self.proc.send_signal(signal.SIGKILL)
        self.proc.wait()
        self._err.close()

    def stop(self) -> None:
        if self.proc.poll() is None:
            stop(self.proc)
        self._err.close()


def _rows(database_url: str, digest: str) -> tuple[list[tuple[Any, ...]], list[tuple[Any, ...]]]:
    """The audit rows of calls with these parameters, and the run records they name."""
    with psycopg.connect(database_url, autocommit=True) as conn:
        audits = conn.execute(
            "select id, decision, outcome, run_id from public.audit_log where params_sha256 = %s", (digest,)
        ).fetchall()
        ids = [a[3] for a in audits if a[3] is not None]
        runs = conn.execute("select id, status from public.tool_runs where id = any(%s)", (ids,)).fetchall()
    return audits, runs


def test_a_server_killed_right_after_its_reply_keeps_the_audit_row_and_the_run_record(
    database_url: str, tmp_path: Path
) -> None:
    cache = tmp_path / "cache"
    params = {"name": f"crash-{uuid.uuid4()}"}  # parameters no other call has: their digest finds the rows
    digest, _ = params_digest(params)

    first = StdioServer(database_url, cache, tmp_path / "first.log")
    try:
        first.initialize()
        reply = first.request("tools/call", _run(params))
        first.kill()  # the moment the reply is read: the writer had no time to write
    finally:
        first.stop()
    result = reply["result"]
    assert not result.get("isError"), result
    assert result["structuredContent"]["output"] == {"greeting": f"Hello, {params['name']}!"}

    at_the_kill = _rows(database_url, digest)  # noted, never relied on: the window the journal closes
    journal = list((cache / "journal").glob("*/*.jsonl"))
    # each line: its MAC, a space, its JSON; a run's audit row rides under "then" (runner/harness/journal.py)
    lines = [json.loads(line.split(" ", 1)[1]) for path in journal for line in path.read_text().splitlines()]
    calls = [line for line in lines if line["kind"] == "run"]
    audited = [
        (call, then)
        for call in calls
        for then in call.get("then", [])
        if then["kind"] == "audit" and then["record"].get("params_sha256") == digest
    ]
    assert len(audited) == 1, (at_the_kill, lines)
    ((call, audit),) = audited
    assert call["id"] == audit["record"]["run_id"], "the audit row is journaled with the record of its run"

    second = StdioServer(database_url, cache, tmp_path / "second.log")  # asked nothing: it replays at start
    try:
        deadline = time.monotonic() + TIMEOUT_S
        audits, runs = _rows(database_url, digest)
        while not (audits and runs) and time.monotonic() < deadline:
            time.sleep(0.1)
            audits, runs = _rows(database_url, digest)
    finally:
        second.stop()
    log = (tmp_path / "second.log").read_text(errors="replace")
    assert len(audits) == 1, (audits, at_the_kill, log)
    (_, decision, outcome, run_id) = audits[0]
    assert (decision, outcome) == ("allowed", "success")
    assert runs == [(run_id, "success")], (runs, log)
    left = [p for p in (cache / "journal").glob("*/*.jsonl") if p.stat().st_size]
    assert not left, "the journal still holds what Postgres has"


def test_a_record_replayed_after_it_was_written_is_not_stored_twice(database_url: str, tmp_path: Path) -> None:
    """A server killed after its writer stored a record but before it emptied its journal leaves
    the record in both: the next server writes it again under its id, which the registry
    already has (23505), and counts it as written, without a second row or a warning."""
    cache = tmp_path / "cache"
    params = {"name": f"twice-{uuid.uuid4()}"}
    digest, _ = params_digest(params)
    first = StdioServer(database_url, cache, tmp_path / "first.log")
    try:
        first.initialize()
        first.request("tools/call", _run(params))
        deadline = time.monotonic() + TIMEOUT_S
        while not all(_rows(database_url, digest)) and time.monotonic() < deadline:
            time.sleep(0.05)  # written, and the journal emptied
    finally:
        first.stop()
    before = _rows(database_url, digest)
    assert len(before[0]) == 1 and len(before[1]) == 1, before
    scope = _only_key(cache)
    left = cache / "journal" / scope / "4194304-0.jsonl"  # as a killed process would leave it
    left.write_bytes(_journal_line(database_url, digest, cache, scope))
    second = StdioServer(database_url, cache, tmp_path / "second.log")
    try:
        deadline = time.monotonic() + TIMEOUT_S
        while _journal_holds(cache) and time.monotonic() < deadline:
            time.sleep(0.05)  # the replayed segment gone, and the writer's own segment written out
    finally:
        second.stop()
    assert not left.exists()
    assert _rows(database_url, digest) == before
    log = (tmp_path / "second.log").read_text(errors="replace")
    assert "not saved" not in log and "dropped" not in log, log
    assert not _journal_holds(cache), "nothing left to replay"


def _journal_holds(cache: Path) -> bool:
    """Whether any journal segment still holds a line (a replayed one is removed; the server's
    own is emptied once the writer stored what it held)."""
    for p in (cache / "journal").glob("*/*.jsonl"):
        try:
            if p.stat().st_size:
                return True
        except FileNotFoundError:  # removed between the listing and the look
            continue
    return False


def _only_key(cache: Path) -> str:
    keys = [p.name for p in (cache / "journal").iterdir()]
    assert len(keys) == 1, keys
    return keys[0]


def _journal_line(database_url: str, digest: str, cache: Path, scope: str) -> bytes:
    """The journal line of the audit row already stored for these parameters, signed with the
    cache's journal key as the runner signs its own (an unsigned line is never replayed:
    test_journal_authenticated.py)."""
    keys = ("id", "session_id", "tool_id", "version", "content_hash", "params_sha256", "params_size", "run_id", "at")
    with psycopg.connect(database_url, autocommit=True) as conn:
        row = conn.execute(
            f"select {', '.join(keys)} from public.audit_log where params_sha256 = %s", (digest,)
        ).fetchone()
    assert row is not None
    entry = {k: v if v is None or isinstance(v, int) else str(v) for k, v in zip(keys, row, strict=True)}
    entry.update(action="run", decision="allowed", outcome="success", duration_ms=1.0)
    owner = {"role": "authenticated", "claims": {"sub": LOCAL_OWNER_ID, "role": "authenticated"}, "source": "journal"}
    line = {"id": entry["id"], "kind": "audit", "as": owner, "record": entry}
    return encode_line(load_key(key_file_in(cache)), scope, line)
