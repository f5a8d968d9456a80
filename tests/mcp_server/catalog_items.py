"""Directives and knowledge entries published for the prompts and resources tests (real
Postgres, through publish_tool_version as an admin), each under a unique reference, and the
server those tests talk to (acting as the local owner, whose namespace is `local`)."""

from __future__ import annotations

import uuid
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import Any

import psycopg
import pytest
from mcp.server.mcpserver import MCPServer
from psycopg.types.json import Jsonb

from runner import Runner, Settings, build_server


class Items:
    """Publishes throwaway directives and knowledge; `cleanup` deletes what it made."""

    def __init__(self, conn: psycopg.Connection) -> None:
        self.conn = conn
        self.made: list[str] = []

    def publish(
        self, manifest: dict[str, Any], files: dict[str, str], *, entrypoint: str | None = None
    ) -> dict[str, Any]:
        rows = [{"path": p, "content_text": t, "is_entrypoint": p == entrypoint} for p, t in files.items()]
        if entrypoint:
            manifest = {**manifest, "entrypoint": entrypoint}
        answer = self.conn.execute("select publish_tool_version(%s, %s)", (Jsonb(manifest), Jsonb(rows))).fetchone()
        ref = (
            manifest["tool_id"]
            if "/" in manifest["tool_id"]
            else f"{manifest.get('namespace', 'local')}/{manifest['tool_id']}"
        )
        if ref not in self.made:
            self.made.append(ref)
        return answer[0] if answer else {}

    def directive(self, ref: str, text: str, *, version: str = "1.0.0", parameters: Any = None, **extra: Any) -> str:
        manifest = {
            "tool_id": ref,
            "tool_type": "directive",
            "executor": "directive_runtime",
            "version": version,
            "description": f"test directive {ref}",
            "name": f"Directive {ref}",
            **({"parameters": parameters} if parameters is not None else {}),
            **extra,
        }
        self.publish(manifest, {"directive.md": text}, entrypoint="directive.md")
        return ref

    def knowledge(self, ref: str, text: str | dict[str, str], *, version: str = "1.0.0", **extra: Any) -> str:
        manifest = {
            "tool_id": ref,
            "tool_type": "knowledge",
            "version": version,
            "description": f"test knowledge {ref}",
            "name": f"Knowledge {ref}",
            **extra,
        }
        if isinstance(text, dict):  # several files, no entrypoint
            self.publish(manifest, text)
        else:
            self.publish(manifest, {"entry.md": text}, entrypoint="entry.md")
        return ref

    def cleanup(self) -> None:
        for ref in reversed(self.made):
            self.conn.execute("delete from tools where ref = %s", (ref,))


def unique(stem: str) -> str:
    """A new reference in the local owner's namespace."""
    return f"local/{stem}_{uuid.uuid4().hex[:8]}"


@pytest.fixture
def items(conn: psycopg.Connection) -> Iterator[Items]:
    made = Items(conn)
    yield made
    made.cleanup()


@pytest.fixture
async def catalog_server(
    tmp_path: Path, make_settings: Callable[..., Settings], make_runner: Callable[..., Runner]
) -> MCPServer:
    return build_server(make_runner(make_settings(cache_dir=tmp_path / "cache")), embedder=None)
