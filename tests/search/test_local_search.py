"""Searching the local spaces (runner/search/local.py, combined.py): real .ai/tools folders in
tmp_path, the bundled embedding model, and the real registry where the registry takes part
(shadowing, a local: query that must not reach it)."""

from __future__ import annotations

import json
from collections.abc import AsyncIterator
from pathlib import Path
from typing import Any

import pytest
import yaml

from runner import LocalWordLlama, PostgresRegistry, RegistryUnavailable, UsageError, local_owner
from runner.search.combined import search
from runner.search.local import list_tools
from runner.search.query import parse

UNREACHABLE = "postgresql://postgres:postgres@127.0.0.1:1/nothing"  # nothing listens on port 1


def tool(root: Path, folder: str, **manifest: Any) -> Path:
    """Write `root/folder/tool.yaml` (version 1.0.0 unless given)."""
    path = root / folder
    path.mkdir(parents=True, exist_ok=True)
    (path / "tool.yaml").write_text(yaml.safe_dump({"version": "1.0.0", **manifest}, sort_keys=False))
    return path


@pytest.fixture
def spaces(tmp_path: Path) -> tuple[tuple[str, Path], tuple[str, Path]]:
    """A project space and a user space, with a few tools each."""
    project, user = tmp_path / "project" / ".ai" / "tools", tmp_path / "home" / ".ai" / "tools"
    tool(
        project,
        "prs/create_pull_request",
        tool_id="create_pull_request",
        tool_type="script",
        executor="python_runtime",
        description="Opens a pull request on GitHub from a branch.",
        category="git",
        parameters=[{"name": "title", "type": "string", "description": "the pull request's title"}],
    )
    tool(
        project,
        "weather",
        tool_id="acme/weather_forecast",
        tool_type="api",
        executor="http_client",
        name="Weather forecast",
        description="The forecast for a city, hour by hour.",
        tags=["weather"],
    )
    tool(
        project,
        "issues",
        tool_id="github_mcp.list_issues",
        tool_type="mcp_tool",
        executor="github_mcp",
        description="Lists the issues of a repository.",
    )
    tool(user, "greeter", tool_id="greet_person", tool_type="script", executor="bash_runtime", description="Greets.")
    tool(
        user,
        "pr_user_copy",
        tool_id="create_pull_request",
        tool_type="script",
        executor="bash_runtime",
        description="The user space's older copy.",
    )
    return ("project", project), ("user", user)


async def find(query: str, spaces: Any, **kwargs: Any) -> list[dict[str, Any]]:
    return (await search(None, parse(query), spaces=spaces, **kwargs)).rows


async def test_any_of_the_words_finds_a_tool_by_stems_prefixes_and_typos(spaces: Any) -> None:
    assert [r["tool_id"] for r in await find("creating pull requests", spaces)] == ["create_pull_request"]
    assert [r["tool_id"] for r in await find("created", spaces)] == ["create_pull_request"]  # a stem
    assert [r["tool_id"] for r in await find("forcast for tomorrow", spaces)] == ["acme/weather_forecast"]
    assert [r["tool_id"] for r in await find("repos", spaces)] == ["github_mcp.list_issues"]  # a prefix
    assert [r["tool_id"] for r in await find("title", spaces)] == ["create_pull_request"]  # a parameter
    assert await find("the of and with", spaces) == []  # stop words only
    assert await find("zzqxvw", spaces) == []
    [row] = await find("weather", spaces)
    assert (row["matched_by"], row["source"]) == ("words", "local:project")
    assert row["search_mode"] == "lexical: embeddings are off (KIWI_EMBEDDINGS=off)"


async def test_more_of_the_words_rank_first_and_the_exact_id_first_of_all(spaces: Any) -> None:
    rows = await find("pull request issues repository", spaces)
    assert [r["tool_id"] for r in rows] == ["create_pull_request", "github_mcp.list_issues"]
    rows = await find("github_mcp.list_issues", spaces)
    assert rows[0]["tool_id"] == "github_mcp.list_issues" and rows[0]["matched_by"] == "id"


async def test_modifiers_filter_local_tools_as_the_registry_filters_its_own(spaces: Any) -> None:
    def ids(rows: list[dict[str, Any]]) -> set[str]:
        return {r["tool_id"] for r in rows}

    assert ids(await find("type:python pull", spaces)) == {"create_pull_request"}  # runtime python_runtime
    assert ids(await find("type:api forecast pull", spaces)) == {"acme/weather_forecast"}
    assert ids(await find("category:GIT request forecast", spaces)) == {"create_pull_request"}
    assert ids(await find("mcp:github issues pull", spaces)) == {"github_mcp.list_issues"}
    assert ids(await find("mcp:* pull issues", spaces)) == {"github_mcp.list_issues"}
    assert ids(await find("namespace:acme forecast pull", spaces)) == {"acme/weather_forecast"}
    assert ids(await find("type:runtime pull", spaces)) == set()
    assert len(await find("", spaces)) == 5 - 1  # a listing: every tool, the shadowed user copy once


async def test_the_project_space_shadows_the_user_space_and_rows_say_which(spaces: Any) -> None:
    [pr] = await find("pull request", spaces)
    assert (pr["source"], pr["executor_id"]) == ("local:project", "python_runtime")
    assert pr["path"].endswith("prs/create_pull_request")
    [greet] = await find("greets", spaces)
    assert greet["source"] == "local:user"


async def test_local_modifiers_choose_a_space(spaces: Any) -> None:
    assert {r["source"] for r in await find("local:user", spaces)} == {"local:user"}
    [pr] = await find("local:user pull request", spaces)  # the user space's own copy, not shadowed there
    assert (pr["source"], pr["executor_id"]) == ("local:user", "bash_runtime")
    assert [r["tool_id"] for r in await find("local:project greets", spaces)] == []
    with pytest.raises(UsageError, match="local:elsewhere"):
        parse("local:elsewhere x")
    query = parse("LOCAL: type:script pull")
    assert (query.local, query.registry_query, query.text, query.tool_type) == (
        "any",
        "type:script pull",
        "pull",
        "script",
    )


async def test_broken_tool_yaml_files_are_skipped_with_one_warning_each(spaces: Any) -> None:
    (_, project), _ = spaces
    for folder, raw in {
        "unclosed": b"tool_id: [broken\n",
        "a_list": b"- tool_id: x\n",
        "no_id": b"description: a tool with no tool_id\n",
        "latin1": "tool_id: caf\xe9\n".encode("latin-1"),
    }.items():
        (project / folder).mkdir()
        (project / folder / "tool.yaml").write_bytes(raw)
    found = await search(None, parse("pull request"), spaces=spaces)
    assert [r["tool_id"] for r in found.rows] == ["create_pull_request"]
    assert len(found.warnings) == 4 and all(w.startswith("skipping ") for w in found.warnings)
    joined = "\n".join(found.warnings)
    for expected in ("unclosed/tool.yaml: not valid YAML", "a_list/tool.yaml: not a mapping", "has no tool_id"):
        assert expected in joined
    assert "latin1/tool.yaml: not UTF-8 text" in joined


async def test_two_tools_of_one_id_in_one_space_list_the_first_and_warn(spaces: Any) -> None:
    (_, project), _ = spaces
    tool(project, "zz_again", tool_id="create_pull_request", tool_type="script", description="again")
    listing = list_tools([spaces[0]])
    assert [e.ref for e in listing.entries].count("create_pull_request") == 1
    assert len(listing.warnings) == 1 and "two tools" in listing.warnings[0]


async def test_meaning_finds_a_tool_that_has_none_of_the_words(spaces: Any) -> None:
    embedder = LocalWordLlama()
    found = await search(None, parse("will it rain tomorrow"), spaces=spaces, embedder=embedder)
    assert [(r["tool_id"], r["matched_by"]) for r in found.rows] == [("acme/weather_forecast", "meaning")]
    assert found.search_mode == "hybrid"
    both = await search(None, parse("weather forecast for a city"), spaces=spaces, embedder=embedder)
    assert both.rows[0]["tool_id"] == "acme/weather_forecast" and both.rows[0]["matched_by"] == "words+meaning"
    # without an embedder: words only, and the answer says why
    words = await search(None, parse("will it rain tomorrow"), spaces=spaces)
    assert words.rows == [] and words.search_mode == "lexical: embeddings are off (KIWI_EMBEDDINGS=off)"


class Broken:
    """An embedder whose model cannot be reached: a real failure, of a kind an API has."""

    model = "broken/none"
    dimensions = 256

    def embed(self, texts: Any) -> list[list[float]]:
        raise ConnectionError("nothing listens there")


async def test_an_embedder_that_fails_leaves_a_search_by_words(spaces: Any) -> None:
    found = await search(None, parse("pull request"), spaces=spaces, embedder=Broken())
    assert [r["tool_id"] for r in found.rows] == ["create_pull_request"]
    assert found.embedding_failed is not None and "nothing listens there" in found.embedding_failed
    assert found.lexical_because == found.embedding_failed


# -- with the registry --------------------------------------------------------------------------


@pytest.fixture
async def registry(database_url: str) -> AsyncIterator[PostgresRegistry]:
    reg = PostgresRegistry(database_url, principal=local_owner())
    yield reg
    await reg.aclose()


async def test_local_searches_only_the_local_spaces_and_never_asks_the_registry(spaces: Any) -> None:
    down = PostgresRegistry(UNREACHABLE, principal=local_owner(), connect_timeout=1)
    try:
        found = await search(down, parse("local: pull request"), spaces=spaces)
        assert [r["tool_id"] for r in found.rows] == ["create_pull_request"]
        with pytest.raises(RegistryUnavailable):  # the same search without local: does ask it
            await search(down, parse("pull request"), spaces=spaces)
    finally:
        await down.aclose()


async def test_local_tools_are_listed_among_the_registrys(registry: PostgresRegistry, spaces: Any) -> None:
    found = await search(registry, parse("greets hello"), spaces=spaces, embedder=LocalWordLlama())
    sources = {r["tool_id"]: r["source"] for r in found.rows}
    assert sources.get("hello_world") == "registry" and sources.get("greet_person") == "local:user"
    assert all(r["search_mode"] == found.search_mode for r in found.rows)
    assert [r["rank"] for r in found.rows] == sorted((r["rank"] for r in found.rows), reverse=True)
    only_local = await search(registry, parse("local: greets hello"), spaces=spaces)
    assert {r["source"] for r in only_local.rows} == {"local:user"}


async def test_a_local_tool_shadows_the_registry_tool_of_its_id(registry: PostgresRegistry, tmp_path: Path) -> None:
    project = tmp_path / ".ai" / "tools"
    tool(
        project,
        "mine",
        tool_id="hello_world",
        tool_type="script",
        executor="bash_runtime",
        version="9.0.0",
        description="Greets someone by name, my own way.",
    )
    found = await search(registry, parse("greets someone"), spaces=[("project", project)])
    hello = [r for r in found.rows if r["tool_id"] == "hello_world"]
    assert len(hello) == 1
    assert (hello[0]["source"], hello[0]["latest_version"], hello[0]["shadows"]) == ("local:project", "9.0.0", True)
    # a local copy that no longer has the words still stands where the registry's matched: it is what runs
    tool(
        project,
        "mine",
        tool_id="hello_world",
        tool_type="script",
        executor="bash_runtime",
        version="9.0.1",
        description="Nothing alike.",
    )
    found = await search(registry, parse("greets someone"), spaces=[("project", project)])
    [hello_row] = [r for r in found.rows if r["tool_id"] == "hello_world"]
    assert (hello_row["source"], hello_row["latest_version"], hello_row["matched_by"]) == (
        "local:project",
        "9.0.1",
        "words",
    )


@pytest.mark.parametrize(
    "manifest",
    [
        {"tool_id": "resize_image", "description": "Resizes an image.", "tags": ["media", "imageTools"]},
        {
            "tool_id": "fetchWeather",
            "name": "Weather forecast",
            "description": "Gets the forecast for a city",
            "parameters": {"type": "object", "properties": {"cityName": {"description": "where"}, "days": {}}},
        },
        {"tool_id": "x", "name": "x", "parameters": [{"name": "max_items", "description": "at most"}]},
    ],
)
def test_a_local_tool_is_embedded_from_the_text_the_registry_embeds(
    manifest: dict[str, Any], conn: Any, tmp_path: Path
) -> None:
    """The local spaces' vectors are compared with the registry's: both embed one text."""
    from runner.search.local import LocalEntry

    entry = LocalEntry(manifest["tool_id"], "project", tmp_path, manifest)
    (registry_text,) = conn.execute(
        "select kiwi_internal.tool_search_text(%s, %s, %s, %s, %s::jsonb)",
        (
            manifest["tool_id"],
            manifest.get("name", manifest["tool_id"]),
            manifest.get("tags", []),
            manifest.get("description", ""),
            json.dumps(manifest.get("parameters")),
        ),
    ).fetchone()
    assert entry.search_text() == registry_text


async def test_a_local_copy_of_a_registry_tool_ranks_on_the_registrys_scale(
    registry: PostgresRegistry, tmp_path: Path
) -> None:
    """Words only, a local tool with the seeded hello_world's fields ranks as the registry ranks
    hello_world, less the full text and quality the registry adds (0..1.1): it once counted 3 a
    word where the registry counts 0.75, and outranked every registry tool with the same words."""
    project = tmp_path / ".ai" / "tools"
    tool(
        project,
        "copy",
        tool_id="hello_world_copy",
        name="Hello world",
        tool_type="script",
        executor="bash_runtime",
        description="Greets someone by name; the smallest complete Bash tool.",
        category="examples",
        tags=["example", "bash", "greeting"],
        parameters=[{"name": "name", "type": "string", "description": "Who to greet."}],
    )
    found = await search(registry, parse("greets someone"), spaces=[("project", project)])
    assert found.search_mode.startswith("lexical")
    ranks = {r["tool_id"]: r["rank"] for r in found.rows}
    assert 0 <= ranks["hello_world"] - ranks["hello_world_copy"] < 1.2, ranks


async def test_a_long_request_ranks_a_short_local_tool_it_describes_above_a_long_one(tmp_path: Path) -> None:
    """Regression, as in the registry: every word of a long request counted alike in a long
    description, which shares many everyday words with it by chance, so the long tool came
    first. For a long request the words now weigh less in a long tool."""
    project = tmp_path / ".ai" / "tools"
    tool(
        project,
        "assistant",
        tool_id="day_assistant",
        tool_type="knowledge",
        description=(
            "An assistant for the day. It reads what came in from a customer overnight, a bug or a billing "
            "question, opens the page of each request, sorts them by how urgent they are and drafts a reply "
            "for you to check before it is sent. Half finished replies are kept somewhere safe in a folder of "
            "drafts, with the history of every conversation, the people in it and the orders they placed."
        ),
    )
    tool(
        project,
        "stash",
        tool_id="stash_changes",
        tool_type="knowledge",
        description="Stash uncommitted changes, leaving a clean working tree.",
    )
    request = (
        "I was halfway through a change to the billing page when an urgent bug came in from a customer. "
        "I do not want to commit the half finished work yet, so please put my uncommitted changes aside "
        "somewhere safe and give me a clean working tree to start from."
    )
    rows = await find(request, [("project", project)])
    assert [r["tool_id"] for r in rows] == ["stash_changes", "day_assistant"], rows


async def test_a_long_request_ranks_the_local_tool_that_says_its_word_often_first(tmp_path: Path) -> None:
    """As in the registry (BM25's term frequency, for a long request): of two tools with the
    request's same words, the one that says "error" four times ranks above the one that says
    it once; before, the words counted once in each and the shorter tool came first."""
    project = tmp_path / ".ai" / "tools"
    digest = (
        "A digest of what the monitoring service captured for a web app in production since its last "
        "release: each entry with its time, its page and the people who saw it. "
    )
    tool(project, "a", tool_id="digest_a", tool_type="knowledge", description=digest + "An error is an entry too.")
    tool(
        project,
        "b",
        tool_id="digest_b",
        tool_type="knowledge",
        description=digest + "Errors: an error, the error's page, every error again: an entry.",
    )
    request = (
        "Users are reporting errors in production since this morning's release. Look up the errors that "
        "our error monitoring service captured for the web app today so we can see what is going wrong."
    )
    rows = await find(request, [("project", project)])
    assert [r["tool_id"] for r in rows] == ["digest_b", "digest_a"], rows
