"""embed_pending against the real registry: the pending texts shrink to none, no text is
embedded twice, and a caller embeds only what it may; then the same loop in memory, where a
registry that stores nothing must not keep it going, and the progress it reports.

Each test embeds with the bundled model under a model id of its own (`Counting`), so that it
starts with every text pending and other tests' vectors never meet its own."""

from __future__ import annotations

import io
import itertools
import uuid
from collections.abc import Callable, Sequence
from typing import Any

import psycopg
import pytest

from runner import (
    LocalWordLlama,
    MemoryBackend,
    PostgresRegistry,
    Refused,
    Registry,
    Settings,
    admin,
    embed_pending,
    local_owner,
)
from runner.search import ProgressBar, embed_published
from runner.search.sync import ROUND


class Counting:
    """The bundled model under a fresh model id, noting every text it is asked to embed."""

    dimensions = 256

    def __init__(self) -> None:
        self.model = f"test/{uuid.uuid4().hex[:12]}"
        self.texts: list[str] = []
        self.local = LocalWordLlama()

    def embed(self, texts: Sequence[str]) -> list[list[float]]:
        self.texts += texts
        return self.local.embed(texts)


def stored(conn: psycopg.Connection, model: str) -> int:
    (n,) = conn.execute("select count(*) from kiwi_internal.search_embeddings where model = %s", (model,)).fetchone()
    return int(n)


@pytest.fixture
def forget(conn: psycopg.Connection) -> Callable[[Counting], Counting]:
    """Delete the vectors of the models a test made, afterwards."""
    made: list[str] = []

    def keep(embedder: Counting) -> Counting:
        made.append(embedder.model)
        return embedder

    yield keep
    for model in made:
        conn.execute("delete from kiwi_internal.search_embeddings where model = %s", (model,))


async def test_an_admin_embeds_every_pending_text_once_until_none_is_pending(
    database_url: str, conn: psycopg.Connection, forget: Callable[[Counting], Counting]
) -> None:
    embedder = forget(Counting())
    (texts,) = conn.execute(
        "select count(distinct search_text_hash) from tools where latest_version is not null "
        "and search_text_hash is not null and visibility <> 'unlisted'"
    ).fetchone()
    seen: list[tuple[int, int, bool]] = []
    async with PostgresRegistry(database_url, principal=admin()) as registry:
        assert len(await registry.pending_search_texts(embedder.model, limit=1000)) == min(texts, 1000)
        count = await embed_pending(registry, embedder, batch=7, progress=lambda *a: seen.append(a))
        assert count == texts == stored(conn, embedder.model) == len(embedder.texts)
        assert len(set(embedder.texts)) == len(embedder.texts)  # no text twice
        assert await registry.pending_search_texts(embedder.model) == []
        assert await embed_pending(registry, embedder, progress=False) == 0  # nothing left: nothing embedded
    assert len(embedder.texts) == texts
    done = [n for n, _, _ in seen]
    assert done[0] == min(7, texts) and all(0 < b - a <= 7 for a, b in itertools.pairwise(done))
    assert seen[-1] == (texts, texts, False) and len(seen) >= -(-texts // 7)  # one report per batch of 7


async def test_a_new_tool_is_the_only_text_embedded_next(
    database_url: str,
    conn: psycopg.Connection,
    publish_tool: Callable[..., str],
    forget: Callable[[Counting], Counting],
) -> None:
    embedder = forget(Counting())
    async with PostgresRegistry(database_url, principal=admin()) as registry:
        await embed_pending(registry, embedder, progress=False)
        before = len(embedder.texts)
        tool = publish_tool("embed_me", {"tool_type": "knowledge", "description": "the kiwi bird's nesting habits"})
        assert await embed_pending(registry, embedder, progress=False) == 1
    assert len(embedder.texts) == before + 1 and "nesting habits" in embedder.texts[-1]
    (hash_,) = conn.execute("select search_text_hash from tools where ref = %s", (tool,)).fetchone()
    assert conn.execute(
        "select 1 from kiwi_internal.search_embeddings where model = %s and text_hash = %s", (embedder.model, hash_)
    ).fetchone()


async def test_a_namespace_member_embeds_only_its_own_tools(
    database_url: str, conn: psycopg.Connection, forget: Callable[[Counting], Counting]
) -> None:
    embedder = forget(Counting())
    tool = f"mine_{uuid.uuid4().hex[:8]}"
    async with PostgresRegistry(database_url, principal=local_owner()) as mine:
        await mine.publish(
            {"tool_id": tool, "namespace": "local", "version": "1.0.0", "tool_type": "knowledge", "description": "d"},
            [{"path": "k.md", "content_text": "k"}],
        )
        try:
            pending = await mine.pending_search_texts(embedder.model, limit=1000)
            (own,) = conn.execute(
                "select count(distinct search_text_hash) from tools where namespace = 'local' "
                "and latest_version is not null and visibility <> 'unlisted'"
            ).fetchone()
            assert len(pending) == own >= 1  # the seeded public tools are not the owner's to embed
            assert await embed_pending(mine, embedder, progress=False) == own
            (public_hash,) = conn.execute("select search_text_hash from tools where ref = 'hello_world'").fetchone()
            theirs = [{"text_hash": public_hash, "embedding": [1.0] + [0.0] * 255}]
            with pytest.raises(Refused, match="no tool you may embed"):
                await mine.store_search_embeddings(embedder.model, theirs)
        finally:
            conn.execute("delete from tools where ref = %s", (f"local/{tool}",))


async def test_a_member_keeps_the_first_vector_and_an_admin_replaces_it(
    database_url: str, conn: psycopg.Connection, forget: Callable[[Counting], Counting]
) -> None:
    embedder = forget(Counting())
    tool = f"kept_{uuid.uuid4().hex[:8]}"
    async with (
        PostgresRegistry(database_url, principal=local_owner()) as mine,
        PostgresRegistry(database_url, principal=admin()) as root,
    ):
        await mine.publish(
            {"tool_id": tool, "namespace": "local", "version": "1.0.0", "tool_type": "knowledge", "description": "d"},
            [{"path": "k.md", "content_text": "k"}],
        )
        try:
            (h,) = conn.execute("select search_text_hash from tools where ref = %s", (f"local/{tool}",)).fetchone()
            one, two = [1.0] + [0.0] * 255, [0.0, 1.0] + [0.0] * 254
            assert await mine.store_search_embeddings(embedder.model, [{"text_hash": h, "embedding": one}]) == 1
            assert await mine.store_search_embeddings(embedder.model, [{"text_hash": h, "embedding": two}]) == 0
            assert await root.store_search_embeddings(embedder.model, [{"text_hash": h, "embedding": two}]) == 1
        finally:
            conn.execute("delete from tools where ref = %s", (f"local/{tool}",))


# -- in memory ------------------------------------------------------------------------------


def plan(tool_id: str, description: str) -> dict[str, Any]:
    manifest = {"name": tool_id, "description": description, "tags": ["t"]}
    return {"tool_id": tool_id, "version": "1.0.0", "tool_type": "script", "content_hash": "h", "manifest": manifest}


PLANS = [plan(f"tool_{n}", f"does thing number {n}") for n in range(10)]


class StoresNothing(MemoryBackend):
    """A registry whose every store is kept by someone else (stores 0), so texts stay pending."""

    def _store_search_embeddings(self, p_model: str, p_items: list[Any]) -> int:
        return 0


async def test_a_registry_that_stores_nothing_does_not_keep_it_going() -> None:
    embedder = Counting()
    assert await embed_pending(Registry(StoresNothing(PLANS)), embedder, batch=4, progress=False) == 0
    assert len(embedder.texts) == 10  # one round: each text once, then it stops


async def test_in_memory_pending_texts_shrink_and_search_then_matches_by_meaning() -> None:
    backend = MemoryBackend([*PLANS, plan("slack_post", "post a chat message to a slack channel")])
    registry, embedder = Registry(backend), Counting()
    assert await embed_pending(registry, embedder, batch=3, progress=False) == 11
    assert await registry.pending_search_texts(embedder.model) == []
    query = embedder.local.embed(["send a message to my team"])[0]
    rows = await registry.search("send a message to my team", embedding=query, model=embedder.model)
    assert rows[0]["tool_id"] == "slack_post" and rows[0]["matched_by"] == "meaning"
    assert rows[0]["search_mode"] == "hybrid"
    words = await registry.search("slack")
    assert [(r["tool_id"], r["search_mode"]) for r in words] == [("slack_post", "lexical: no query embedding")]


async def test_the_bar_counts_and_shows_a_rate_on_a_terminal_and_lines_elsewhere() -> None:
    live, log = io.StringIO(), io.StringIO()
    for stream, is_live in ((live, True), (log, False)):
        bar = ProgressBar(stream, live=is_live)
        bar(3, 10, False)
        bar(10, 10, False)
        bar.close()
    assert live.getvalue().startswith("\rembedding [#######.................] 3/10 texts, ")
    assert live.getvalue().count("\r") == 2 and live.getvalue().endswith("/s\n")
    lines = log.getvalue().splitlines()
    assert len(lines) == 2 and lines[1].startswith("embedding [########################] 10/10 texts, ")
    assert "\r" not in log.getvalue()
    ProgressBar(io.StringIO(), live=True)(ROUND, ROUND, True)  # more may follow: shown with a +


async def test_progress_true_draws_on_stderr(capsys: pytest.CaptureFixture[str]) -> None:
    assert await embed_pending(Registry(MemoryBackend(PLANS)), Counting(), batch=5, progress=True) == 10
    err = capsys.readouterr().err.splitlines()
    assert [line.split("] ")[1].split(" texts")[0] for line in err] == ["5/10", "10/10"]


async def test_a_failing_model_never_fails_a_publish_but_says_so() -> None:
    settings = Settings.load(
        {"HOME": "/nonexistent", "KIWI_EMBEDDINGS": "openai", "KIWI_EMBEDDINGS_URL": "http://127.0.0.1:9/v1"}
    )
    count, warning = await embed_published(Registry(MemoryBackend(PLANS)), settings)
    assert count == 0 and warning is not None
    assert "cannot reach the embeddings API" in warning and "words only until `kiwi embed` runs" in warning
    off = Settings.load({"HOME": "/nonexistent", "KIWI_EMBEDDINGS": "off"})
    assert await embed_published(Registry(MemoryBackend(PLANS)), off) == (0, None)
