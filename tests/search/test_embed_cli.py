"""`kiwi embed`, and `kiwi publish` embedding what it published: real processes, the real
database, and for a hosted model the FAKE OpenAI-compatible server (fake_embeddings.py)."""

from __future__ import annotations

import uuid
from collections.abc import Callable, Iterator
from pathlib import Path

import psycopg
import pytest

from runner import LocalWordLlama
from tests.kiwi_cli import Done, kiwi_env, run_kiwi
from tests.search.fake_embeddings import fake_embeddings_server

Kiwi = Callable[..., Done]
LOCAL = LocalWordLlama.model


@pytest.fixture
def kiwi(database_url: str, tmp_path: Path) -> Kiwi:
    workdir = tmp_path / "cwd"
    workdir.mkdir()

    def run(*args: str, env: dict[str, str] | None = None) -> Done:
        return run_kiwi(args, cwd=workdir, env={**kiwi_env(database_url, tmp_path / "cache"), **(env or {})})

    return run


@pytest.fixture
def local_tool(tmp_path: Path, conn: psycopg.Connection) -> Iterator[tuple[str, Path]]:
    """A knowledge tool directory for namespace `local` (the local owner's); deleted afterwards."""
    tool_id = f"embed_cli_{uuid.uuid4().hex[:8]}"
    directory = tmp_path / tool_id
    directory.mkdir()
    (directory / "tool.yaml").write_text(
        f"tool_id: {tool_id}\nnamespace: local\ntool_type: knowledge\nversion: 1.0.0\n"
        "description: how kiwi birds find earthworms at night\n"
    )
    (directory / "k.md").write_text("by smell\n")
    yield tool_id, directory
    conn.execute("delete from tools where ref = %s", (f"local/{tool_id}",))


def vector_of(conn: psycopg.Connection, ref: str, model: str) -> bool:
    return bool(
        conn.execute(
            "select 1 from tools t join kiwi_internal.search_embeddings e on e.text_hash = t.search_text_hash "
            "where t.ref = %s and e.model = %s",
            (ref, model),
        ).fetchone()
    )


def test_embed_then_nothing_is_left_to_embed(kiwi: Kiwi) -> None:
    first = kiwi("--admin", "embed")
    assert first.code == 0, first.err
    assert first.out.startswith("embedded ") and f"texts with {LOCAL} in " in first.out
    again = kiwi("--admin", "embed", "--json")
    assert again.code == 0, again.err
    assert again.json()["model"] == LOCAL and again.json()["embedded"] == 0


def test_publish_embeds_what_it_published(kiwi: Kiwi, conn: psycopg.Connection, local_tool: tuple[str, Path]) -> None:
    tool_id, directory = local_tool
    done = kiwi("publish", str(directory))
    assert done.code == 0, done.err
    assert done.out.startswith(f"published: local/{tool_id}@1.0.0")
    assert "warning" not in done.err
    assert vector_of(conn, f"local/{tool_id}", LOCAL)
    assert kiwi("embed", "--json").json()["embedded"] == 0  # the owner's texts: all embedded already


def test_a_hosted_model_that_fails_warns_on_publish_and_fails_embed_clearly(
    kiwi: Kiwi, conn: psycopg.Connection, local_tool: tuple[str, Path]
) -> None:
    _, directory = local_tool
    with fake_embeddings_server(status=500, error_message="the model is on fire, key sk-leak-9") as fake:
        env = {
            "KIWI_EMBEDDINGS": "openai",
            "KIWI_EMBEDDINGS_URL": fake.url,
            "KIWI_EMBEDDINGS_MODEL": f"fake-{uuid.uuid4().hex[:8]}",
            "KIWI_EMBEDDINGS_KEY": "${FAKE_EMBEDDINGS_KEY}",
            "FAKE_EMBEDDINGS_KEY": "sk-leak-9",
        }
        published = kiwi("publish", str(directory), env=env)
        embedded = kiwi("embed", env=env)
    assert published.code == 0, published.err
    assert published.out.startswith("published:")
    assert "warning: not embedded for search" in published.err and "HTTP 500" in published.err
    assert "found by words only until `kiwi embed` runs" in published.err
    assert embedded.code == 1
    assert embedded.err.startswith(f"kiwi: the embeddings API at {fake.url}/embeddings answered HTTP 500")
    for done in (published, embedded):
        assert "Traceback" not in done.err and "sk-leak-9" not in done.err + done.out
    assert fake.requests and fake.requests[0]["headers"]["Authorization"] == "Bearer sk-leak-9"


def test_embed_with_a_hosted_model_shows_progress_and_stores_its_vectors(kiwi: Kiwi, conn: psycopg.Connection) -> None:
    name = f"fake-{uuid.uuid4().hex[:8]}"
    try:
        with fake_embeddings_server() as fake:
            env = {"KIWI_EMBEDDINGS": "openai", "KIWI_EMBEDDINGS_URL": fake.url, "KIWI_EMBEDDINGS_MODEL": name}
            done = kiwi("--admin", "embed", "--progress", "--batch", "5", env=env)
        assert done.code == 0, done.err
        (count,) = conn.execute(
            "select count(*) from kiwi_internal.search_embeddings where model = %s", (f"openai/{name}",)
        ).fetchone()
        assert count > 0 and done.out.startswith(f"embedded {count} texts with openai/{name} in ")
        bars = done.err.splitlines()
        assert bars[-1].startswith("embedding [########################] ") and f"{count}/{count} texts" in bars[-1]
        assert len(fake.requests) == len(bars) == -(-count // 5)  # one request and one line per batch of 5
    finally:
        conn.execute("delete from kiwi_internal.search_embeddings where model = %s", (f"openai/{name}",))


def test_an_admin_refreshes_every_vector_and_nobody_else_may(kiwi: Kiwi, conn: psycopg.Connection) -> None:
    """`--refresh` re-embeds every text, replacing each stored vector, whatever stored it."""
    assert kiwi("--admin", "embed").code == 0
    (texts,) = conn.execute(
        "select count(distinct search_text_hash) from tools"
        " where latest_version is not null and visibility <> 'unlisted'"
    ).fetchone()
    flat_vector = "array_fill(0.5::real, array[256])::extensions.vector"
    conn.execute(f"update kiwi_internal.search_embeddings set embedding = {flat_vector} where model = %s", (LOCAL,))
    refreshed = kiwi("--admin", "embed", "--refresh", "--batch", "7", "--json")
    assert refreshed.code == 0, refreshed.err
    assert refreshed.json()["embedded"] == texts > 7  # every text, over several batches and pages
    (flat,) = conn.execute(
        "select count(*) from kiwi_internal.search_embeddings e where model = %s"
        " and embedding::text = array_fill(0.5::real, array[256])::extensions.vector::text"
        " and exists (select 1 from tools t where t.search_text_hash = e.text_hash and t.latest_version is not null"
        "             and t.visibility <> 'unlisted')",
        (LOCAL,),
    ).fetchone()
    assert flat == 0, "every vector of a text some tool has was replaced"
    refused = kiwi("embed", "--refresh")
    assert refused.code == 4 and "is for service_role" in refused.err and "Traceback" not in refused.err
