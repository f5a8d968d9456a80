"""`kiwi search` as people and scripts run it: a real process, the real database with the bundled
model's vectors stored, real .ai/tools folders. The query's embedding is computed in the CLI's
process and sent with the search: a tool that has none of the query's words can only be found
by meaning when it was."""

from __future__ import annotations

import time
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import Any

import pytest
import yaml

from runner import LocalWordLlama, PostgresRegistry, admin, embed_pending
from tests.kiwi_cli import Done, kiwi_env, run_kiwi

Kiwi = Callable[..., Done]
UNREACHABLE = "postgresql://postgres:postgres@127.0.0.1:1/nothing"


@pytest.fixture
def project(tmp_path: Path) -> Path:
    """The directory kiwi runs in: a project whose local space is .ai/tools."""
    (tmp_path / "project" / ".ai" / "tools").mkdir(parents=True)
    return tmp_path / "project"


@pytest.fixture
def kiwi(database_url: str, tmp_path: Path, project: Path) -> Kiwi:
    """`kiwi(*args, env=...)` in the project, with an empty user space of its own."""

    def run(*args: str, env: dict[str, str] | None = None) -> Done:
        base = kiwi_env(database_url, tmp_path / "cache", KIWI_USER_SPACE=str(tmp_path / "home-tools"))
        return run_kiwi(args, cwd=project, env={**base, **(env or {})})

    return run


def local_tool(project: Path, folder: str, **manifest: Any) -> None:
    path = project / ".ai" / "tools" / folder
    path.mkdir(parents=True, exist_ok=True)
    (path / "tool.yaml").write_text(yaml.safe_dump({"version": "1.0.0", **manifest}, sort_keys=False))


@pytest.fixture
def weather(publish_tool: Callable[..., str], database_url: str, loop: Any) -> Iterator[str]:
    """A published tool about the weather, its text embedded by the bundled model (with every
    other pending text: what `kiwi --admin embed` does)."""
    tool_id = publish_tool(
        "weather_report",
        {
            "tool_type": "knowledge",
            "description": "The weather forecast for a city: temperature, wind and rain, hour by hour.",
        },
    )

    async def embed() -> None:
        registry = PostgresRegistry(database_url, principal=admin())
        try:
            await embed_pending(registry, LocalWordLlama(), progress=False)
        finally:
            await registry.aclose()

    loop.run_until_complete(embed())
    yield tool_id


def test_search_sends_the_query_embedding_and_shows_how_each_row_matched(kiwi: Kiwi, weather: str) -> None:
    # none of these words is the tool's: only the query's embedding can find it
    done = kiwi("search", "climate", "conditions", "--limit", "50", "--json")
    assert done.code == 0, done.err
    rows = {r["tool_id"]: r for r in done.json()}
    assert rows[weather]["matched_by"] == "meaning"
    assert {r["search_mode"] for r in rows.values()} == {"hybrid"}
    assert "words only" not in done.err
    both = kiwi("search", "weather", "forecast")
    assert both.code == 0, both.err
    line = next(line for line in both.out.splitlines() if line.startswith(f"{weather} "))
    assert "words+meaning" in line and "knowledge" in line and "The weather forecast" in line


def test_a_search_by_words_only_says_why_once(kiwi: Kiwi, weather: str) -> None:
    off = kiwi("search", "weather", "forecast", "--json", env={"KIWI_EMBEDDINGS": "off"})
    assert off.code == 0, off.err
    row = next(r for r in off.json() if r["tool_id"] == weather)
    assert (row["matched_by"], row["search_mode"]) == ("words", "lexical: embeddings are off (KIWI_EMBEDDINGS=off)")
    assert off.err.strip().splitlines() == ["note: matched by words only: embeddings are off (KIWI_EMBEDDINGS=off)"]
    nothing = kiwi("search", "climate", "conditions", "--json", "--limit", "50", env={"KIWI_EMBEDDINGS": "off"})
    assert weather not in {r["tool_id"] for r in nothing.json()}
    listing = kiwi("search", "type:knowledge", "--limit", "3")  # no words: nothing to embed, nothing to say
    assert listing.code == 0 and listing.err == "", listing.err


def test_an_embedder_that_fails_falls_back_to_words_with_one_warning(kiwi: Kiwi, weather: str) -> None:
    broken = {"KIWI_EMBEDDINGS": "openai", "KIWI_EMBEDDINGS_URL": "http://127.0.0.1:1/v1"}  # nothing listens
    done = kiwi("search", "weather", "forecast", "--json", env=broken)
    assert done.code == 0, done.err
    row = next(r for r in done.json() if r["tool_id"] == weather)
    assert row["matched_by"] == "words" and row["search_mode"].startswith("lexical: the query could not be embedded")
    [line] = done.err.strip().splitlines()
    assert line.startswith("warning: searching by words only: the query could not be embedded")
    assert "127.0.0.1:1" in line and "Traceback" not in done.err
    # an embedder that cannot even be made (its key's variable is unset): the same, words and one warning
    unset = {"KIWI_EMBEDDINGS": "openai", "KIWI_EMBEDDINGS_KEY": "${KIWI_TEST_UNSET_KEY}"}
    made = kiwi("search", "weather", "forecast", env=unset)
    assert made.code == 0 and made.out.startswith(weather), made.err
    [line] = made.err.strip().splitlines()
    assert line.startswith("warning: searching by words only:") and "KIWI_TEST_UNSET_KEY is not set" in line


def test_local_tools_are_found_and_marked_and_shadow_the_registrys(kiwi: Kiwi, project: Path) -> None:
    local_tool(
        project,
        "mine",
        tool_id="hello_world",
        tool_type="script",
        executor="bash_runtime",
        version="7.0.0",
        description="Greets someone by name, the project's way.",
    )
    local_tool(
        project,
        "deploy",
        tool_id="deploy_docs",
        tool_type="script",
        executor="bash_runtime",
        description="Publishes the documentation site.",
    )
    done = kiwi("search", "greets", "someone", "--json")
    assert done.code == 0, done.err
    hello = [r for r in done.json() if r["tool_id"] == "hello_world"]
    assert len(hello) == 1
    assert (hello[0]["source"], hello[0]["latest_version"], hello[0]["shadows"]) == ("local:project", "7.0.0", True)
    assert hello[0]["signature"]["state"] == "local"
    table = kiwi("search", "publishes", "documentation")
    line = next(line for line in table.out.splitlines() if line.startswith("deploy_docs "))
    assert " local " in line and "7.0.0" not in line and "Publishes the documentation" in line


def test_local_searches_the_local_spaces_alone(kiwi: Kiwi, project: Path) -> None:
    local_tool(
        project,
        "deploy",
        tool_id="deploy_docs",
        tool_type="script",
        executor="bash_runtime",
        description="Publishes the documentation site.",
    )
    (project / ".ai" / "tools" / "broken").mkdir()
    (project / ".ai" / "tools" / "broken" / "tool.yaml").write_text("tool_id: [unclosed\n")
    # the registry is unreachable: local: never asks it
    done = kiwi("search", "local:", "documentation", "--json", env={"KIWI_DATABASE_URL": UNREACHABLE})
    assert done.code == 0, done.err
    assert [(r["tool_id"], r["source"]) for r in done.json()] == [("deploy_docs", "local:project")]
    [warning] = [line for line in done.err.splitlines() if line.startswith("warning:")]
    assert "broken/tool.yaml: not valid YAML" in warning and "Traceback" not in done.err
    asked = kiwi("search", "documentation", env={"KIWI_DATABASE_URL": UNREACHABLE})
    assert asked.code == 5, asked.err  # without local:, the registry is asked (and is unreachable)
    wrong = kiwi("search", "local:elsewhere", "x")
    assert wrong.code == 2 and "local:elsewhere" in wrong.err


def test_search_help_names_every_modifier(kiwi: Kiwi) -> None:
    done = kiwi("search", "--help")
    assert done.code == 0
    for word in ("type:", "category:", "mcp:", "namespace:", "local:", "matched_by", "search_mode", "KIWI_EMBEDDINGS"):
        assert word in done.out, word


def test_a_provider_that_does_not_answer_delays_a_search_by_five_seconds_at_most(kiwi: Kiwi, weather: str) -> None:
    """Regression: a hosted provider that hung held every search for the bulk timeout (30 s)."""
    from tests.search.fake_embeddings import fake_embeddings_server

    with fake_embeddings_server(delay_s=20.0) as fake:  # a FAKE provider that answers too late
        slow = {"KIWI_EMBEDDINGS": "openai", "KIWI_EMBEDDINGS_URL": fake.url}
        started = time.monotonic()
        done = kiwi("search", "weather", "forecast", env=slow)  # run_kiwi gives up after 60 s
        waited = time.monotonic() - started
    assert done.code == 0 and done.out.startswith(weather), done.err
    assert "did not answer within 5 s" in done.err and waited < 20
