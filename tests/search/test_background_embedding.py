"""A tool published by any path is found by meaning without a manual step: a running `kiwi serve`
(or `kiwi worker`) embeds what SQL published, in the background; until then `kiwi search`
and the MCP `search` say how many results were matched by words only; and stale vectors are
pruned. Real processes, the real database, the bundled local model (KIWI_EMBEDDINGS=local)."""

from __future__ import annotations

import json
import time
import uuid
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import psycopg
import pytest
from mcp import Client
from psycopg.types.json import Jsonb

from runner import LocalWordLlama, PostgresRegistry, Runner, build_server, local_owner
from runner.testing.http_serving import kiwi_http_server, mcp_client
from tests.conftest import local_settings
from tests.fleet.workers import start_worker, stop
from tests.kiwi_cli import kiwi_env, run_kiwi

LOCAL = LocalWordLlama.model
DESCRIPTION = "how kiwi birds find earthworms at night by their sense of smell"
QUERY = "kiwi birds earthworms night smell"


@pytest.fixture
def sql_tool(conn: psycopg.Connection) -> Iterator[str]:
    """A knowledge tool of namespace `local` published through SQL only (no runner embeds it);
    deleted afterwards with its vector."""
    tool_id = f"nightly_forager_{uuid.uuid4().hex[:8]}"
    ref = f"local/{tool_id}"
    yield tool_id
    hashes = [r[0] for r in conn.execute("select search_text_hash from tools where ref = %s", (ref,)).fetchall()]
    conn.execute("delete from tools where ref = %s", (ref,))
    conn.execute("delete from kiwi_internal.search_embeddings where text_hash = any(%s)", (hashes,))


def publish_through_sql(conn: psycopg.Connection, tool_id: str) -> float:
    manifest = {
        "tool_id": tool_id,
        "namespace": "local",
        "tool_type": "knowledge",
        "version": "1.0.0",
        "description": DESCRIPTION,
    }
    files = [{"path": "k.md", "content_text": "by smell"}]
    conn.execute("select publish_tool_version(%s, %s)", (Jsonb(manifest), Jsonb(files)))
    return time.monotonic()


def embedded(conn: psycopg.Connection, ref: str) -> bool:
    row = conn.execute(
        "select 1 from tools t join kiwi_internal.search_embeddings e on e.text_hash = t.search_text_hash"
        " where t.ref = %s and e.model = %s",
        (ref, LOCAL),
    ).fetchone()
    return row is not None


def wait_for(check: Any, timeout: float, what: str) -> None:
    deadline = time.monotonic() + timeout
    while not check():
        assert time.monotonic() < deadline, f"not within {timeout} s: {what}"
        time.sleep(0.05)


def item(structured: dict[str, Any], ref: str) -> dict[str, Any] | None:
    return next((i for i in structured["items"] if i["item_id"] == ref), None)


async def test_a_tool_published_through_sql_is_found_by_meaning_through_a_running_serve(
    database_url: str, conn: psycopg.Connection, sql_tool: str, tmp_path: Path
) -> None:
    ref = f"local/{sql_tool}"
    with kiwi_http_server(database_url, tmp_path, "--insecure-no-auth", KIWI_EMBEDDINGS="local") as served:
        published = publish_through_sql(conn, sql_tool)
        async with mcp_client(served.url, None) as client:
            deadline = time.monotonic() + 20
            while True:
                result = await client.call_tool("search", {"query": QUERY})
                found = item(result.structured_content or {}, ref)
                if found is not None and "meaning" in (found["matched_by"] or ""):
                    break
                assert time.monotonic() < deadline, f"{ref} never found by meaning: {result.structured_content}"
                time.sleep(0.1)
        took = time.monotonic() - published
        assert (result.structured_content or {}).get("unembedded") is None
    print(f"published through SQL -> found by meaning through kiwi serve in {took:.2f} s")
    assert took < 10, "the publish's notification wakes the embedder: no waiting for the poll"
    assert "Traceback" not in served.stderr() and "background embedding failed" not in served.stderr()


def test_a_worker_embeds_what_sql_published(
    database_url: str, conn: psycopg.Connection, sql_tool: str, tmp_path: Path
) -> None:
    log = tmp_path / "worker.log"
    worker = start_worker(database_url, tmp_path / "cache", "--poll", "1", log=log, env={"KIWI_EMBEDDINGS": "local"})
    try:
        wait_for(lambda: "taking queued runs" in log.read_text(errors="replace"), 30, "the worker started")
        publish_through_sql(conn, sql_tool)
        wait_for(lambda: embedded(conn, f"local/{sql_tool}"), 20, "the worker embedded the tool")
    finally:
        stop(worker)
    assert worker.returncode == 0, log.read_text()
    assert "Traceback" not in log.read_text()


def test_search_says_how_many_results_were_matched_by_words_only(
    database_url: str, conn: psycopg.Connection, sql_tool: str, tmp_path: Path
) -> None:
    ref = f"local/{sql_tool}"
    publish_through_sql(conn, sql_tool)  # no serve, no worker running here: nothing embeds it
    env = kiwi_env(database_url, tmp_path / "cache", KIWI_EMBEDDINGS="local")
    done = run_kiwi(("search", QUERY, "--json"), cwd=tmp_path, env=env)
    assert done.code == 0, done.err
    rows = json.loads(done.out)
    mine = next(r for r in rows if r["tool_id"] == ref)
    assert mine["matched_by"] == "words"
    assert f"1 of these tools has no vector for {LOCAL} yet, so could be matched by words only" in done.err
    embed = run_kiwi(("embed",), cwd=tmp_path, env=env)  # the owner's own namespace: `local`
    assert embed.code == 0, embed.err
    again = run_kiwi(("search", QUERY, "--json"), cwd=tmp_path, env=env)
    assert "matched by words only" not in again.err
    assert next(r for r in json.loads(again.out) if r["tool_id"] == ref)["matched_by"] == "words+meaning"


async def test_mcp_search_names_the_unembedded_results(
    database_url: str, conn: psycopg.Connection, sql_tool: str, tmp_path: Path
) -> None:
    ref = f"local/{sql_tool}"
    publish_through_sql(conn, sql_tool)
    # the server in process, without `kiwi serve`'s background embedder: the tool stays unembedded
    runner = Runner(PostgresRegistry(database_url, principal=local_owner()), local_settings(database_url, tmp_path))
    try:
        async with Client(build_server(runner, embedder=LocalWordLlama())) as client:
            result = await client.call_tool("search", {"query": QUERY})
    finally:
        await runner.aclose()
    structured = result.structured_content or {}
    assert item(structured, ref)["matched_by"] == "words"  # type: ignore[index]
    assert structured["unembedded"] == 1
    (warning,) = [w for w in structured["warnings"] if "matched by words only" in w]
    assert warning.startswith(f"1 of these tools has no vector for {LOCAL} yet")
    assert f"warning: {warning}" in result.content[0].text  # type: ignore[union-attr]


def test_an_admin_embed_prunes_an_orphan_vector(database_url: str, conn: psycopg.Connection, tmp_path: Path) -> None:
    orphan = uuid.uuid4().hex + uuid.uuid4().hex  # the sha256-shaped hash of a text no tool has
    old_model = f"retired-{uuid.uuid4().hex[:8]}"
    kept_model = f"in-use-{uuid.uuid4().hex[:8]}"
    (live,) = conn.execute("select search_text_hash from tools where search_text_hash is not null limit 1").fetchone()
    vector = "array_fill(0.5::real, array[256])::extensions.vector"
    insert = (
        "insert into kiwi_internal.search_embeddings (model, text_hash, embedding, created_at)"
        f" values (%s, %s, {vector}, %s)"
    )
    conn.execute(insert, (LOCAL, orphan, "now"))
    conn.execute(insert, (old_model, live, "2020-01-01"))  # a model nobody stored with for years
    conn.execute(insert, (kept_model, live, "now"))  # another model, in use
    try:
        env = kiwi_env(database_url, tmp_path / "cache", KIWI_EMBEDDINGS="local")
        mine = run_kiwi(("embed", "--json"), cwd=tmp_path, env=env)  # not an admin: nothing pruned
        assert mine.code == 0 and mine.json()["pruned"] == 0, mine.err
        assert conn.execute("select 1 from kiwi_internal.search_embeddings where text_hash = %s", (orphan,)).fetchone()
        done = run_kiwi(("--admin", "embed", "--json"), cwd=tmp_path, env=env)
        assert done.code == 0, done.err
        assert json.loads(done.out)["pruned"] >= 2
        left = {
            (m, h)
            for m, h in conn.execute(
                "select model, text_hash from kiwi_internal.search_embeddings where model = any(%s)",
                ([LOCAL, old_model, kept_model],),
            ).fetchall()
        }
        assert (LOCAL, orphan) not in left and (old_model, live) not in left
        assert (kept_model, live) in left
    finally:
        conn.execute(
            "delete from kiwi_internal.search_embeddings where model = any(%s) or text_hash = %s",
            ([old_model, kept_model], orphan),
        )
