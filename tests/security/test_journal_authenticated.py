"""Only lines the runner wrote are replayed from the run journal (runner/harness/journal.py).

Found on a clean checkout: a tool appended two lines to a journal segment, and replay stored
them as another user and as service_role, because a line names the principal it is stored
as. Now every line carries an HMAC-SHA256 under a key only the runner holds; `adopt()` drops
(and counts, in one warning naming the segment) every line that does not verify: no MAC, a
wrong one, one made under another key, a genuine line whose principal was altered, one moved
from another registry's journal, and the lines of journals written before lines were signed.
A genuine orphan is still replayed (and so is the real crash: test_records_survive_a_crash.py).
"""

from __future__ import annotations

import json
import logging
import os
import stat
import subprocess
import sys
import uuid
from pathlib import Path
from typing import Any

import psycopg
import pytest

from runner import PostgresRegistry, Principal, local_owner
from runner.harness.journal import Journal, encode_line, journal_for, key_file_in, load_key
from runner.harness.recorder import RunRecorder

ROOT = Path(__file__).resolve().parents[2]
SERVICE_ROLE = {"role": "service_role", "claims": {"role": "service_role"}, "source": "journal"}
SOMEONE_ELSE = {"role": "authenticated", "claims": {"sub": str(uuid.uuid4()), "role": "authenticated"}}
MARKER = "forged-by-a-tool"  # in every forged record: never in a log message
PRINT_KEY = f"""
import sys
sys.path.insert(0, {str(ROOT)!r})
from pathlib import Path
from runner.harness.journal import load_key
print(load_key(Path(sys.argv[1])).hex())
"""


def _journal(cache: Path, scope: str = "0123456789abcdef") -> Journal:
    return Journal(cache / "journal" / scope, key_file_in(cache))


def _record(tool: str) -> dict[str, Any]:
    return {"tool_id": tool, "status": "success"}


def _orphan(journal: Journal, lines: list[bytes]) -> Path:
    """A segment as a killed process (or a tool) would leave it."""
    journal.directory.mkdir(parents=True, exist_ok=True)
    path = journal.directory / f"{4_000_000 + len(list(journal.directory.iterdir()))}-0.jsonl"
    path.write_bytes(b"".join(lines))
    return path


def _genuine(cache: Path, tool: str, principal: Principal | None = None) -> tuple[str, Path]:
    """One record appended by a real journal of this cache, whose process then ended."""
    writer = _journal(cache)
    record_id = str(uuid.uuid4())
    writer.append(record_id, "run", principal or local_owner(), {**_record(tool), "id": record_id})
    writer.close()  # outstanding: kept on disk for the next start
    (segment,) = [p for p in writer.directory.glob("*.jsonl") if p.stat().st_size]
    return record_id, segment


def _forgeries(journal: Journal, tool: str) -> dict[str, bytes]:
    """Every kind of line a tool could add to this journal, each naming service_role or another user."""
    key = load_key(journal.key_file)
    scope = journal.directory.name

    def line(who: dict[str, Any]) -> dict[str, Any]:
        record_id = str(uuid.uuid4())
        return {"id": record_id, "kind": "run", "as": who, "record": {**_record(tool), "id": record_id}}

    def plain(line: dict[str, Any]) -> bytes:
        return (json.dumps(line) + "\n").encode()

    mac, text = encode_line(key, scope, line({**SOMEONE_ELSE, "source": "journal"})).split(b" ", 1)
    altered = json.loads(text)
    altered["as"] = SERVICE_ROLE  # a genuine line, its principal changed, its MAC kept
    canonical = {**json.loads(text), "mac": mac.decode()}  # the same MAC moved into the earlier form
    return {
        "no mac": plain(line(SERVICE_ROLE)),
        "another user, no mac": plain(line(SOMEONE_ELSE)),
        "a wrong mac": plain({**line(SERVICE_ROLE), "mac": "0" * 64}),
        "a mac that is not a string": plain({**line(SERVICE_ROLE), "mac": 1}),
        "a wrong mac before the line": b"0" * 64 + b" " + plain(line(SERVICE_ROLE)),
        "another key": encode_line(os.urandom(32), scope, line(SERVICE_ROLE)),
        "an altered principal": mac + b" " + plain(altered),
        "an altered principal, re-spaced": mac + b" " + (json.dumps(altered, separators=(",", ":")) + "\n").encode(),
        "a genuine mac in the earlier form": plain(canonical),
        "another registry's journal": encode_line(key, "fedcba9876543210", line(SERVICE_ROLE)),
    }


@pytest.mark.slow
def test_the_key_is_made_once_private_and_kept(tmp_path: Path) -> None:
    path = key_file_in(tmp_path)
    key = load_key(path)
    assert len(key) == 32 and path.read_bytes() == key
    assert stat.S_IMODE(path.stat().st_mode) == 0o600
    assert stat.S_IMODE(path.parent.stat().st_mode) == 0o700
    assert [p.name for p in path.parent.iterdir()] == ["journal.key"], "nothing left aside"
    runs = [subprocess.run([sys.executable, "-c", PRINT_KEY, str(path)], capture_output=True, text=True) for _ in "ab"]
    assert [r.stdout.strip() for r in runs] == [key.hex()] * 2, "another process reads the same key"


@pytest.mark.slow
def test_processes_starting_together_agree_on_one_key(tmp_path: Path) -> None:
    path = key_file_in(tmp_path)
    procs = [
        subprocess.Popen([sys.executable, "-c", PRINT_KEY, str(path)], stdout=subprocess.PIPE, text=True)
        for _ in range(8)
    ]
    keys = {p.communicate(timeout=60)[0].strip() for p in procs}
    assert keys == {path.read_bytes().hex()}
    assert [p.name for p in path.parent.iterdir()] == ["journal.key"]


def test_forged_lines_are_never_replayed_and_a_genuine_orphan_still_is(
    tmp_path: Path, caplog: pytest.LogCaptureFixture
) -> None:
    cache = tmp_path / "cache"
    genuine_id, genuine_segment = _genuine(cache, "journal_test")
    reader = _journal(cache)
    forgeries = _forgeries(reader, MARKER)
    apart = {name: _orphan(reader, [line]) for name, line in forgeries.items()}
    mixed = _orphan(reader, [genuine_segment.read_bytes(), *forgeries.values()])
    genuine_segment.unlink()  # its line is in the mixed segment now
    with caplog.at_level(logging.WARNING, logger="kiwi.runner"):
        found = reader.adopt()
    reader.close()
    assert [(f.record_id, f.kind) for f in found] == [(genuine_id, "run")]
    owner, principal = local_owner(), found[0].principal
    assert principal is not None and (principal.role, principal.claims) == (owner.role, dict(owner.claims))
    messages = [r.getMessage() for r in caplog.records]
    for name, path in apart.items():
        assert any(f"dropped 1 line(s) of the run journal segment {path} " in m for m in messages), (name, messages)
    assert any(f"dropped {len(forgeries)} line(s) of the run journal segment {mixed} " in m for m in messages)
    assert not any(MARKER in m or "service_role" in m for m in messages), "a dropped line's content is never logged"
    assert not [p for p in apart.values() if p.exists()] and not mixed.exists(), "adopted segments are removed"


def test_a_journal_written_before_lines_were_signed_is_dropped_with_a_warning(
    tmp_path: Path, caplog: pytest.LogCaptureFixture
) -> None:
    reader = _journal(tmp_path)
    old = {"id": str(uuid.uuid4()), "kind": "audit", "as": None, "record": {"decision": "allowed"}}
    segment = _orphan(reader, [(json.dumps(old, separators=(",", ":")) + "\n").encode()] * 3)
    with caplog.at_level(logging.WARNING, logger="kiwi.runner"):
        assert reader.adopt() == []
    assert any(f"dropped 3 line(s) of the run journal segment {segment}" in r.getMessage() for r in caplog.records)


def test_a_key_others_can_read_disables_the_journal_instead_of_trusting_it(
    tmp_path: Path, caplog: pytest.LogCaptureFixture
) -> None:
    _, segment = _genuine(tmp_path, "journal_test")
    key_file_in(tmp_path).chmod(0o644)
    from runner.harness import journal

    journal._keys.clear()  # a new process
    reader = _journal(tmp_path)
    with caplog.at_level(logging.WARNING, logger="kiwi.runner"):
        assert reader.adopt() == []
    assert not reader.enabled and segment.exists(), "nothing replayed, nothing lost"
    assert any("key" in r.getMessage() and "unusable" in r.getMessage() for r in caplog.records)


async def test_through_the_recorder_only_the_genuine_record_reaches_the_registry(
    database_url: str, conn: psycopg.Connection, tmp_path: Path, caplog: pytest.LogCaptureFixture
) -> None:
    """The real replay: a RunRecorder over Postgres adopts the journal at start and writes
    what it kept. The forged records name service_role, which could have stored them."""
    tool = f"journal_test_{uuid.uuid4().hex[:8]}"
    registry = PostgresRegistry(database_url, principal=local_owner())
    journal = journal_for(tmp_path, registry.backend)
    assert journal is not None
    try:
        writer = journal_for(tmp_path, registry.backend)
        assert writer is not None
        genuine_id = str(uuid.uuid4())
        writer.append(genuine_id, "run", local_owner(), {"tool_id": tool, "status": "success", "id": genuine_id})
        writer.close()
        forged = _forgeries(journal, tool)
        _orphan(journal, list(forged.values()))
        with caplog.at_level(logging.WARNING, logger="kiwi.runner"):
            recorder = RunRecorder(registry, journal=journal)
            await recorder.flush()
            recorder.close()
        stored = {r[0] for r in conn.execute("select id::text from tool_runs where tool_id = %s", (tool,))}
        assert stored == {genuine_id}, stored
        assert any(f"dropped {len(forged)} line(s)" in r.getMessage() for r in caplog.records)
    finally:
        conn.execute("delete from tool_runs where tool_id = %s", (tool,))
        await registry.aclose()


def test_a_signed_line_is_its_mac_over_the_very_json_that_follows() -> None:
    """encode_line writes the MAC (over the journal's scope and the line's JSON as written), a
    space and that JSON, so a reader verifies exactly the text it parses; a line of the earlier
    form (canonical JSON holding its MAC as "mac") is still read, and only under its own context."""
    import hashlib
    import hmac

    from runner.harness.journal import MAC_CONTEXT, verified

    key = os.urandom(32)
    line = {
        "id": "r1",
        "kind": "run",
        "as": {"role": "authenticated", "claims": {"sub": "ü", 3: [1, 2.5, None]}, "source": "x"},
        "record": {"params": {"b": "\u2028", "a": {"z": 1, "y": [True, "é"]}}, "at": Path("/tmp")},
    }
    plain = json.loads(json.dumps(line, default=str))
    encoded = encode_line(key, "scope", line)
    mac, text = encoded.rstrip(b"\n").split(b" ", 1)
    assert b"\n" not in text and json.loads(text) == plain
    assert mac == hmac.new(key, MAC_CONTEXT + b"scope\n" + text, hashlib.sha256).hexdigest().encode()
    assert verified(key, "scope", encoded) == plain
    assert verified(key, "other", encoded) is None

    def canonical(value: Any) -> bytes:
        return json.dumps(value, sort_keys=True, separators=(",", ":"), ensure_ascii=True).encode()

    earlier = hmac.new(key, b"kiwi-journal-line-v1\nscope\n" + canonical(plain), hashlib.sha256).hexdigest()
    assert verified(key, "scope", canonical({**plain, "mac": earlier})) == plain, "a line an earlier runner left"
    assert verified(key, "other", canonical({**plain, "mac": earlier})) is None
    current = hmac.new(key, MAC_CONTEXT + b"scope\n" + canonical(plain), hashlib.sha256).hexdigest()
    assert verified(key, "scope", canonical({**plain, "mac": current})) is None, "each form under its own context"
