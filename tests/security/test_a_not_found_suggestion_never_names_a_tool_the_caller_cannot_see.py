"""A not-found error's "did you mean ns/tool?" is found by the registry's search acting as the
caller: a private tool of another tenant is never named, a public one in their namespace is."""

from __future__ import annotations

import uuid
from collections.abc import Iterator
from pathlib import Path

import psycopg
import pytest
from psycopg.types.json import Jsonb

from runner.testing.http_serving import two_tenants
from tests.kiwi_cli import Done, kiwi_env, run_kiwi

FILES = Jsonb([{"path": "k.md", "content_text": "SHOUT", "is_entrypoint": True}])


@pytest.fixture
def tenants(conn: psycopg.Connection) -> Iterator[dict[str, dict[str, str]]]:
    with two_tenants(conn, "sg") as made:
        yield made


def publish(conn: psycopg.Connection, ref: str, visibility: str) -> None:
    manifest = {
        "tool_id": ref,
        "tool_type": "knowledge",
        "version": "1.0.0",
        "visibility": visibility,
        "description": "A tenant's tool, for the suggestion tests.",
        "entrypoint": "k.md",
    }
    conn.execute("select publish_tool_version(%s, %s)", (Jsonb(manifest), FILES))


def run_as(database_url: str, tmp_path: Path, token: str, name: str) -> Done:
    env = kiwi_env(database_url, tmp_path / "cache", KIWI_ACCESS_TOKEN=token)
    return run_kiwi(("run", name), cwd=tmp_path, env=env)


def test_only_tools_the_caller_can_see_are_suggested(
    database_url: str, tmp_path: Path, conn: psycopg.Connection, tenants: dict[str, dict[str, str]]
) -> None:
    a, b = tenants["a"], tenants["b"]
    secret, shared = f"secret_{uuid.uuid4().hex[:8]}", f"shared_{uuid.uuid4().hex[:8]}"
    publish(conn, f"{a['ns']}/{secret}", "private")
    publish(conn, f"{a['ns']}/{shared}", "public")

    own = run_as(database_url, tmp_path, a["token"], secret)
    assert own.code == 3 and f"hint: did you mean {a['ns']}/{secret}?" in own.err.splitlines()

    other = run_as(database_url, tmp_path, b["token"], secret)
    assert other.code == 3, other.err
    assert a["ns"] not in other.err and "did you mean" not in other.err, "another tenant's private tool stays unnamed"

    public = run_as(database_url, tmp_path, b["token"], shared)
    assert f"hint: did you mean {a['ns']}/{shared}?" in public.err.splitlines()
