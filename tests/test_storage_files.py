"""Tool files kept in Supabase Storage, against a fake of Storage's object API
(tests/fake_storage.py): `kiwi publish` puts a file larger than the inline limit in Storage and
the registry's row names it by storage_key; `kiwi run` and MCP `execute` fetch it, check it
against its sha256 and run the tool as if the file were inline; an object whose bytes changed
after publishing is refused with a clear error and nothing runs.
"""

from __future__ import annotations

import json
import uuid
from collections.abc import Callable, Iterator
from pathlib import Path

import psycopg
import pytest
from mcp import Client

from runner import Runner, build_server
from tests.fake_storage import FakeStorage, fake_storage
from tests.kiwi_cli import Done, kiwi_env, run_kiwi
from tests.mcp_server.test_server import ok

pytestmark = pytest.mark.slow

BIG = ("0123456789abcdef" * 64 + "\n") * 100  # 102,500 bytes: over the 64 KiB inline limit
SCRIPT = """#!/usr/bin/env bash
set -euo pipefail
cd "$(dirname "$0")"
printf '{"bytes": %s, "lines": %s}\\n' "$(wc -c < data.txt)" "$(wc -l < data.txt)"
"""


@pytest.fixture
def storage() -> Iterator[FakeStorage]:
    with fake_storage() as fake:
        yield fake


@pytest.fixture
def published(
    storage: FakeStorage, database_url: str, conn: psycopg.Connection, tmp_path: Path
) -> Iterator[tuple[str, Callable[..., Done]]]:
    """A tool with a big data file, published with Storage configured; and `kiwi` with it too."""
    tool_id = f"stored_{uuid.uuid4().hex[:8]}"
    directory = tmp_path / tool_id
    directory.mkdir()
    manifest = {
        "tool_id": tool_id,
        "namespace": "local",
        "version": "1.0.0",
        "tool_type": "script",
        "executor": "bash_runtime",
        "description": "Counts the bytes of a data file kept in Storage.",
        "entrypoint": "count.sh",
    }
    (directory / "tool.yaml").write_text(json.dumps(manifest))
    (directory / "count.sh").write_text(SCRIPT)
    (directory / "data.txt").write_text(BIG)

    def kiwi(*args: str, cache: str = "cache", **extra: str) -> Done:
        env = kiwi_env(database_url, tmp_path / cache, KIWI_STORAGE_URL=storage.url, KIWI_STORAGE_KEY=storage.token)
        return run_kiwi(list(args), cwd=tmp_path, env={**env, **extra})

    done = kiwi("publish", str(directory))
    assert done.code == 0, done.err
    assert "stored: data.txt (102500 bytes) in Supabase Storage" in done.out, done.out
    yield f"local/{tool_id}", kiwi
    conn.execute("delete from tools where ref = %s", (f"local/{tool_id}",))


def test_publish_puts_a_large_file_in_storage_and_kiwi_run_uses_it(
    published: tuple[str, Callable[..., Done]], storage: FakeStorage, conn: psycopg.Connection
) -> None:
    ref, kiwi = published
    rows = conn.execute(
        """select f.path, f.content_text is null, f.storage_key, f.sha256, f.size_bytes
             from tool_version_files f join tool_versions v on v.id = f.version_id
             join tools t on t.id = v.tool_uuid where t.ref = %s order by f.path""",
        (ref,),
    ).fetchall()
    by_path = {r[0]: r[1:] for r in rows}
    assert by_path["count.sh"][0] is False  # small files stay inline
    no_text, storage_key, sha256, size = by_path["data.txt"]
    assert no_text and size == len(BIG) and storage_key == f"kiwi-tool-files/sha256/{sha256}"
    assert storage.objects[storage_key] == BIG.encode()

    done = kiwi("run", ref, "--json")
    assert done.code == 0, done.err
    assert done.json()["output"] == {"bytes": len(BIG), "lines": 100}
    assert ("GET", storage_key) in storage.requests


def test_an_object_changed_in_storage_is_refused_and_nothing_runs(
    published: tuple[str, Callable[..., Done]], storage: FakeStorage, tmp_path: Path
) -> None:
    ref, kiwi = published
    [key] = [k for k in storage.objects]
    storage.objects[key] = BIG.replace("abc", "xyz", 1).encode()  # same size, other bytes
    done = kiwi("run", ref, "--json", cache="fresh")
    assert done.code == 4, (done.out, done.err)
    result = done.json()
    said = json.dumps(result)
    assert "data.txt" in said and "does not match its sha256" in said and "nothing ran" in said, said
    assert result["output"] is None and result["exit_code"] is None
    cache = tmp_path / "fresh"
    kept = [p for d in ("blobs", "tools") if (cache / d).exists() for p in (cache / d).iterdir()]
    assert kept == [], kept  # nothing fetched was kept, nothing was written to run


def test_without_storage_configured_a_stored_file_is_a_clear_refusal(
    published: tuple[str, Callable[..., Done]],
) -> None:
    ref, kiwi = published
    done = kiwi("run", ref, cache="none", KIWI_STORAGE_URL="")
    assert done.code == 4
    assert "kept in Supabase Storage" in done.err and "no Storage is configured" in done.err, done.err


async def test_mcp_execute_runs_a_tool_whose_file_is_in_storage(
    published: tuple[str, Callable[..., Done]], storage: FakeStorage, make_runner: Callable[..., Runner]
) -> None:
    ref, _ = published
    runner = make_runner(environ={"KIWI_STORAGE_URL": storage.url, "KIWI_STORAGE_KEY": storage.token})
    async with Client(build_server(runner), mode="legacy") as c:
        result = ok(await c.call_tool("execute", {"action": "run", "item_id": ref}))
    assert result["output"] == {"bytes": len(BIG), "lines": 100}


async def test_mcp_publish_puts_a_large_file_in_storage_as_kiwi_publish_does(
    storage: FakeStorage, make_runner: Callable[..., Runner], conn: psycopg.Connection
) -> None:
    tool_id = f"mcp_stored_{uuid.uuid4().hex[:8]}"
    runner = make_runner(environ={"KIWI_STORAGE_URL": storage.url, "KIWI_STORAGE_KEY": storage.token})
    manifest = {
        "tool_id": tool_id,
        "namespace": "local",
        "version": "1.0.0",
        "tool_type": "script",
        "executor": "bash_runtime",
        "description": "Counts the bytes of a data file kept in Storage, published over MCP.",
        "entrypoint": "count.sh",
    }
    files = [
        {"path": "count.sh", "content_text": SCRIPT, "is_entrypoint": True},
        {"path": "data.txt", "content_text": BIG},
    ]
    try:
        async with Client(build_server(runner), mode="legacy") as c:
            ok(await c.call_tool("execute", {"action": "create", "manifest": manifest, "files": files}))
            result = ok(await c.call_tool("execute", {"action": "run", "item_id": f"local/{tool_id}"}))
        assert result["output"] == {"bytes": len(BIG), "lines": 100}
        row = conn.execute(
            """select f.content_text is null, f.storage_key from tool_version_files f
                 join tool_versions v on v.id = f.version_id join tools t on t.id = v.tool_uuid
                where t.ref = %s and f.path = 'data.txt'""",
            (f"local/{tool_id}",),
        ).fetchone()
        assert row is not None and row[0] is True and row[1] in storage.objects, row
    finally:
        conn.execute("delete from tools where ref = %s", (f"local/{tool_id}",))


async def test_a_session_token_is_renewed_for_storage_and_a_stale_one_refused() -> None:
    """A long-lived command's Storage key from a `kiwi login` session is asked of the session on
    each fetch (renewed shortly before it expires), not the token the command started with."""
    import hashlib

    from runner import PlanFile, Refused
    from runner.registry.storage import Storage

    data = b"x" * 100
    digest = hashlib.sha256(data).hexdigest()
    with fake_storage(token="fresh-session-token") as store:
        stale = Storage(store.url, "stale-session-token")
        store.objects[stale.key_for(digest)] = data
        stored = PlanFile("big.bin", digest, len(data), False, None, storage_key=stale.key_for(digest))
        with pytest.raises(Refused, match="403"):
            await stale.download(stored)
        renewed = Storage(store.url, "stale-session-token", renew=lambda: ("fresh-session-token", 2e9))
        assert await renewed.download(stored) == data
