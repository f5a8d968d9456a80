"""A tool published into someone's own namespace without `visibility` is private: only the
namespace's members see it (it used to be public, so a user's first tool was everyone's to read).
The `public` namespace keeps public as its default; `visibility: public` still shares a tool."""

from __future__ import annotations

import uuid
from collections.abc import Iterator
from pathlib import Path

import psycopg
import pytest
from psycopg.types.json import Jsonb

from runner.testing.http_serving import two_tenants
from tests.kiwi_cli import Done, kiwi_env, run_kiwi


@pytest.fixture
def tenants(conn: psycopg.Connection) -> Iterator[dict[str, dict[str, str]]]:
    with two_tenants(conn, "pv") as made:
        yield made


def tool_dir(root: Path, ref: str, version: str = "1.0.0", visibility: str | None = None) -> Path:
    folder = root / f"{ref.replace('/', '_')}-{version}"
    folder.mkdir(parents=True)
    lines = [
        f"tool_id: {ref}",
        "tool_type: knowledge",
        f"version: {version}",
        "description: Notes.",
        "entrypoint: k.md",
    ]
    if visibility is not None:
        lines.append(f"visibility: {visibility}")
    (folder / "tool.yaml").write_text("\n".join(lines) + "\n")
    (folder / "k.md").write_text("notes\n")
    return folder


def kiwi_as(database_url: str, tmp_path: Path, token: str, *args: str) -> Done:
    env = kiwi_env(database_url, tmp_path / "cache", KIWI_ACCESS_TOKEN=token)
    return run_kiwi(args, cwd=tmp_path, env=env)


def visibility(conn: psycopg.Connection, ref: str) -> str:
    return conn.execute("select visibility from tools where ref = %s", (ref,)).fetchone()[0]


def test_a_users_tool_without_visibility_is_private_to_their_namespace(
    database_url: str, tmp_path: Path, conn: psycopg.Connection, tenants: dict[str, dict[str, str]]
) -> None:
    a, b = tenants["a"], tenants["b"]
    ref = f"{a['ns']}/notes_{uuid.uuid4().hex[:8]}"
    done = kiwi_as(database_url, tmp_path, a["token"], "publish", str(tool_dir(tmp_path, ref)))
    assert done.code == 0, done.err
    assert f"visibility: private (the default in namespace {a['ns']}" in done.out
    assert visibility(conn, ref) == "private"
    assert kiwi_as(database_url, tmp_path, a["token"], "run", ref).code == 0, "its owner runs it"
    assert kiwi_as(database_url, tmp_path, b["token"], "run", ref).code == 3, "another user cannot see it"
    # a later version that says nothing either keeps it private (the latest version decides)
    again = kiwi_as(database_url, tmp_path, a["token"], "publish", str(tool_dir(tmp_path, ref, "1.1.0")))
    assert again.code == 0, again.err
    assert visibility(conn, ref) == "private"


def test_visibility_public_still_shares_a_users_tool(
    database_url: str, tmp_path: Path, conn: psycopg.Connection, tenants: dict[str, dict[str, str]]
) -> None:
    a, b = tenants["a"], tenants["b"]
    ref = f"{a['ns']}/shared_{uuid.uuid4().hex[:8]}"
    done = kiwi_as(database_url, tmp_path, a["token"], "publish", str(tool_dir(tmp_path, ref, visibility="public")))
    assert done.code == 0, done.err
    assert "visibility:" not in done.out, "said only when the default was taken"
    assert visibility(conn, ref) == "public"
    assert kiwi_as(database_url, tmp_path, b["token"], "run", ref).code == 0


def test_the_public_namespace_stays_public_by_default(conn: psycopg.Connection) -> None:
    ref = f"notes_{uuid.uuid4().hex[:8]}"
    manifest = {"tool_id": ref, "tool_type": "knowledge", "version": "1.0.0", "description": "x", "entrypoint": "k.md"}
    files = [{"path": "k.md", "content_text": "x", "is_entrypoint": True}]
    try:
        conn.execute("select publish_tool_version(%s, %s)", (Jsonb(manifest), Jsonb(files)))
        assert visibility(conn, ref) == "public"
    finally:
        conn.execute("delete from tools where ref = %s", (ref,))
