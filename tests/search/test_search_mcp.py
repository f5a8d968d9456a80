"""The MCP server's `search` meta-tool through the SDK's own client, in memory: the query is
embedded in the server's process, items say how they matched and the answer how it was
ranked, and the local spaces are searched exactly when the server serves them
(`--local-spaces`). The real database, the bundled model, real .ai/tools folders."""

from __future__ import annotations

import dataclasses
from collections.abc import Callable
from pathlib import Path
from typing import Any

import pytest
import yaml
from mcp import Client
from mcp_types import CallToolResult

from runner import LocalWordLlama, PostgresRegistry, Runner, Settings, admin, build_server, embed_pending


def text(result: CallToolResult) -> str:
    return "\n".join(getattr(block, "text", "") for block in result.content)


def ok(result: CallToolResult) -> dict[str, Any]:
    assert not result.is_error, text(result)
    assert result.structured_content is not None
    return result.structured_content


@pytest.fixture
def project(tmp_path: Path) -> Path:
    """A project with two local tools: its own hello_world, and one the registry has not."""
    tools = tmp_path / "project" / ".ai" / "tools"
    for folder, manifest in {
        "hello": {"tool_id": "hello_world", "version": "5.0.0", "description": "Greets someone by name, locally."},
        "docs": {"tool_id": "deploy_docs", "version": "1.0.0", "description": "Publishes the documentation site."},
    }.items():
        (tools / folder).mkdir(parents=True)
        manifest = {**manifest, "tool_type": "script", "executor": "bash_runtime"}
        (tools / folder / "tool.yaml").write_text(yaml.safe_dump(manifest))
    return tmp_path / "project"


@pytest.fixture
async def runner(
    database_url: str,
    tmp_path: Path,
    project: Path,
    make_settings: Callable[..., Settings],
    make_runner: Callable[..., Runner],
) -> Runner:
    embedder = PostgresRegistry(database_url, principal=admin())  # the stored vectors `kiwi --admin embed` makes
    try:
        await embed_pending(embedder, LocalWordLlama(), progress=False)
    finally:
        await embedder.aclose()
    settings = make_settings(cache_dir=tmp_path / "cache", project_dir=project, user_space=tmp_path / "no-user-space")
    return make_runner(settings)


async def test_items_say_how_they_matched_and_the_answer_how_it_was_ranked(runner: Runner) -> None:
    async with Client(build_server(runner)) as client:
        found = ok(await client.call_tool("search", {"query": "greets someone by name"}))
        shown = text(await client.call_tool("search", {"query": "greets someone by name"}))
    assert found["search_mode"] == "hybrid"
    first = found["items"][0]
    assert (first["item_id"], first["matched_by"], first["source"]) == ("hello_world", "words+meaning", "registry")
    assert "deploy_docs" not in {i["item_id"] for i in found["items"]}  # local spaces are not served
    assert "words+meaning" in next(line for line in shown.splitlines() if line.startswith("hello_world "))
    assert "words only" not in shown


async def test_local_spaces_are_searched_when_the_server_serves_them(runner: Runner) -> None:
    async with Client(build_server(runner, local_spaces=True)) as client:
        found = ok(await client.call_tool("search", {"query": "greets someone by name"}))
        docs = ok(await client.call_tool("search", {"query": "local: documentation", "item_type": "tool"}))
    hello = [i for i in found["items"] if i["item_id"] == "hello_world"]
    assert len(hello) == 1  # the local copy shadows the registry's: what execute would run
    assert (hello[0]["source"], hello[0]["latest_version"], hello[0]["signature"]["state"]) == (
        "local:project",
        "5.0.0",
        "local",
    )
    assert [(i["item_id"], i["source"]) for i in docs["items"]] == [("deploy_docs", "local:project")]


async def test_local_is_refused_politely_by_a_server_without_local_spaces(runner: Runner) -> None:
    async with Client(build_server(runner)) as client:
        result = await client.call_tool("search", {"query": "local: documentation"})
    found = ok(result)
    assert found["count"] == 0 and "--local-spaces" in found["warnings"][0]
    assert "--local-spaces" in text(result)


async def test_without_embeddings_the_answer_is_by_words_and_says_why(runner: Runner) -> None:
    runner.settings = dataclasses.replace(runner.settings, embeddings="off")
    async with Client(build_server(runner)) as client:
        result = await client.call_tool("search", {"query": "greets someone by name"})
    found = ok(result)
    assert found["search_mode"] == "lexical: embeddings are off (KIWI_EMBEDDINGS=off)"
    assert found["items"][0]["matched_by"] == "words"
    assert "matched by words only: embeddings are off" in text(result)
    async with Client(build_server(runner, embedder=LocalWordLlama())) as client:  # an embedder given wins
        assert ok(await client.call_tool("search", {"query": "greets someone"}))["search_mode"] == "hybrid"
