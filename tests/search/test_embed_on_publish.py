"""What an import or an MCP write publishes is embedded right after, and a model that fails
never fails the write: it says the tools are found by words only until `kiwi embed` runs.
Real database, real MCP server processes (the `everything` test server), real CLI processes,
and the FAKE OpenAI-compatible server for a failing hosted model."""

from __future__ import annotations

import dataclasses
import os
import uuid
from collections.abc import Iterator
from pathlib import Path

import psycopg
import pytest
from mcp import Client
from psycopg.types.json import Jsonb

from runner import LocalWordLlama, McpPool, PostgresRegistry, Runner, admin, build_server, standard_dispatcher
from tests.conftest import local_settings
from tests.kiwi_cli import kiwi_env, run_kiwi
from tests.mcp import EVERYTHING, NODE_MODULES, stdio_server, unique
from tests.search.fake_embeddings import fake_embeddings_server

LOCAL = LocalWordLlama.model


@pytest.fixture
def server(conn: psycopg.Connection) -> Iterator[str]:
    """A fresh everything server row; deleted afterwards with every tool it executes."""
    ref = unique("embedded_everything")
    conn.execute("select publish_tool_version(%s, '[]')", (Jsonb(stdio_server(ref, [str(EVERYTHING), "stdio"])),))
    yield ref
    conn.execute("delete from tools where executor_id = %s", (ref,))
    conn.execute("delete from tools where ref = %s", (ref,))


def unembedded(conn: psycopg.Connection, where: str, value: str, model: str = LOCAL) -> list[str]:
    """Refs of the tools matching `where = value` that have no vector for `model`."""
    rows = conn.execute(
        f"select t.ref from tools t where t.{where} = %s and not exists (select 1 from "
        "kiwi_internal.search_embeddings e where e.model = %s and e.text_hash = t.search_text_hash)",
        (value, model),
    ).fetchall()
    return [r[0] for r in rows]


def test_kiwi_mcp_import_embeds_the_tools_it_published(
    server: str, conn: psycopg.Connection, database_url: str, tmp_path: Path
) -> None:
    env = kiwi_env(database_url, tmp_path / "cache", KIWI_NODE_MODULES=str(NODE_MODULES))
    done = run_kiwi(("--admin", "mcp", "import", server), cwd=tmp_path, env=env, timeout=120)
    assert done.code == 0, done.err
    (count,) = conn.execute("select count(*) from tools where executor_id = %s", (server,)).fetchone()
    assert count >= 10
    assert unembedded(conn, "executor_id", server) == []
    assert "warning" not in done.err


def runner_with(database_url: str, cache: Path, **settings: str) -> Runner:
    base = local_settings(database_url, cache)
    environ = {**os.environ, "KIWI_NODE_MODULES": str(NODE_MODULES)}
    dispatcher = standard_dispatcher(mcp_pool=McpPool())
    registry = PostgresRegistry(database_url, principal=admin())
    return Runner(registry, dataclasses.replace(base, **settings), dispatcher=dispatcher, environ=environ)


async def test_the_mcp_servers_import_embeds_what_it_published(
    server: str, conn: psycopg.Connection, database_url: str, tmp_path: Path
) -> None:
    runner = runner_with(database_url, tmp_path / "cache")
    pool = next(h.pool for h in runner.dispatcher.handlers if hasattr(h, "pool"))
    try:
        async with Client(build_server(runner, mcp_pool=pool)) as client:
            result = await client.call_tool("execute", {"action": "import", "item_id": server})
    finally:
        await runner.aclose()
    assert not result.is_error, result.content
    assert "warnings" not in (result.structured_content or {})
    assert unembedded(conn, "executor_id", server) == []


async def test_an_mcp_create_with_a_failing_model_is_published_and_says_it_is_not_embedded(
    conn: psycopg.Connection, database_url: str, tmp_path: Path
) -> None:
    tool = f"mcp_created_{uuid.uuid4().hex[:8]}"
    manifest = {"tool_id": tool, "namespace": "local", "version": "1.0.0", "tool_type": "knowledge"}
    files = [{"path": "k.md", "content_text": "what kiwis eat"}]
    try:
        with fake_embeddings_server(status=429, error_message="rate limited") as fake:
            model = dict(embeddings="openai", embeddings_url=fake.url, embeddings_model="fake-model")
            runner = runner_with(database_url, tmp_path / "cache", **model)
            try:
                async with Client(build_server(runner)) as client:
                    result = await client.call_tool(
                        "execute", {"action": "create", "manifest": {**manifest, "description": "d"}, "files": files}
                    )
            finally:
                await runner.aclose()
        assert not result.is_error, result.content
        said = result.content[0].text  # type: ignore[union-attr]
        assert said.startswith(f"published: local/{tool}@1.0.0")
        assert "warning: not embedded for search" in said and "HTTP 429: rate limited" in said
        (warning,) = (result.structured_content or {})["warnings"]
        assert "found by words only until `kiwi embed` runs" in warning
        assert unembedded(conn, "ref", f"local/{tool}", "openai/fake-model") == [f"local/{tool}"]
    finally:
        conn.execute("delete from tools where ref = %s", (f"local/{tool}",))
