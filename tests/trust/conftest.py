"""Fixtures for the trust tests: a CLI in a project directory, signing keys, and tools on a
runtime of their own (so that moving or signing it touches no other test's tools)."""

from __future__ import annotations

import json
import uuid
from collections.abc import Callable, Iterator
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import psycopg
import pytest
from psycopg.types.json import Jsonb

from tests.kiwi_cli import Done, kiwi_env, run_kiwi

ROOT = Path(__file__).resolve().parents[2]
SAY = '#!/usr/bin/env bash\nprintf \'{"said": "%s"}\\n\' "$KIWI_PARAM_WORD"\n'


@dataclass
class Project:
    """A project directory: `kiwi(...)` runs the CLI there, with its own config.toml and keys."""

    dir: Path
    env: dict[str, str]

    def kiwi(self, *args: str, **extra_env: str) -> Done:
        return run_kiwi(args, cwd=self.dir, env={**self.env, **extra_env})

    def trust(self, policy: str, keys: dict[str, list[str]]) -> None:
        lines = ["[trust]", f'policy = "{policy}"', "[trust.keys]"]
        lines += [f'"{ns}" = {json.dumps(k)}' for ns, k in keys.items()]
        (self.dir / "config.toml").write_text("\n".join(lines) + "\n")


@pytest.fixture
def project(database_url: str, tmp_path: Path) -> Project:
    directory = tmp_path / "project"
    (directory / ".ai").mkdir(parents=True)
    env = kiwi_env(
        database_url,
        tmp_path / "cache",
        KIWI_KEYS_DIR=str(tmp_path / "keys"),
        KIWI_USER_SPACE=str(tmp_path / "user-space"),
        KIWI_ADMIN="1",  # these tests publish and sign into `public`, which only an admin may
    )
    return Project(directory, env)


@pytest.fixture
def make_key(project: Project) -> Callable[[str], dict[str, str]]:
    def make(name: str) -> dict[str, str]:
        done = project.kiwi("keys", "generate", "--name", name, "--json")
        assert done.code == 0, done.err
        return done.json()

    return make


@dataclass
class Chain:
    runtime: str
    tool: str


@pytest.fixture
def chain(conn: psycopg.Connection) -> Iterator[Chain]:
    """`tool` (a Bash script saying a word) on `runtime` (a copy of bash_runtime) on subprocess."""
    suffix = uuid.uuid4().hex[:8]
    runtime, tool = f"trust_rt_{suffix}", f"trust_tool_{suffix}"
    publish_runtime(conn, runtime, "1.0.0")
    publish(
        conn,
        {
            "tool_id": tool,
            "tool_type": "script",
            "executor": runtime,
            "version": "1.0.0",
            "entrypoint": "say.sh",
            "parameters": [{"name": "word", "type": "string", "required": True}],
        },
        {"say.sh": SAY},
    )
    yield Chain(runtime, tool)
    conn.execute("delete from tools where ref = %s", (tool,))
    conn.execute("delete from tools where ref = %s", (runtime,))


def publish(conn: psycopg.Connection, manifest: dict[str, Any], files: dict[str, str] | None = None) -> dict[str, Any]:
    rows = [{"path": p, "content_text": t} for p, t in (files or {}).items()]
    return conn.execute("select publish_tool_version(%s, %s)", (Jsonb(manifest), Jsonb(rows))).fetchone()[0]


def publish_runtime(conn: psycopg.Connection, runtime: str, version: str) -> dict[str, Any]:
    return publish(
        conn,
        {
            "tool_id": runtime,
            "tool_type": "runtime",
            "executor": "subprocess",
            "version": version,
            "config": {"command": "bash", "args": ["{entrypoint}"]},
        },
    )


@pytest.fixture
def forget_signatures(conn: psycopg.Connection) -> Iterator[list[str]]:
    """Fingerprints whose signatures (also on seeded tools) are removed after the test."""
    fingerprints: list[str] = []
    yield fingerprints
    conn.execute("delete from tool_version_signatures where key_fingerprint = any(%s)", (fingerprints,))
