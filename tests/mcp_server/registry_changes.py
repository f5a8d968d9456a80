"""What the registry-notification tests share: an inbox of the notifications an SDK client
receives, publishing through another connection (as an admin, the way a second agent or a
`kiwi publish` elsewhere would), and waiting for the server's one LISTEN connection."""

from __future__ import annotations

import asyncio
import contextlib
import time
import uuid
from typing import Any

import psycopg
from psycopg.types.json import Jsonb

WAIT_S = 10.0  # the bound on a notification's arrival (the batch waits 0.3 s of quiet, 2 s at most)
LISTENERS_SQL = (
    "select count(*) from pg_stat_activity where datname = current_database() and query = 'listen kiwi_registry'"
)


class Inbox:
    """The notifications a client received, as (method, uri or None), in order."""

    def __init__(self) -> None:
        self.got: list[tuple[str, str | None]] = []
        self._changed = asyncio.Event()

    async def __call__(self, message: Any) -> None:
        message = getattr(message, "root", message)
        method = getattr(message, "method", None)
        if method is None:
            return
        params = getattr(message, "params", None)
        self.got.append((method, getattr(params, "uri", None)))
        self._changed.set()

    def count(self, method: str, uri: str | None = None) -> int:
        return sum(1 for m, u in self.got if m == method and (uri is None or u == uri))

    async def wait_for(self, method: str, uri: str | None = None, *, after: int = 0, timeout: float = WAIT_S) -> None:
        """Until more than `after` notifications `method` (for `uri`) have arrived."""
        deadline = time.monotonic() + timeout
        while self.count(method, uri) <= after:
            left = deadline - time.monotonic()
            if left <= 0:
                raise AssertionError(f"no {method} {uri or ''} within {timeout}s; got {self.got}")
            self._changed.clear()
            with contextlib.suppress(TimeoutError):
                await asyncio.wait_for(self._changed.wait(), left)


async def listening(database_url: str, expected: int = 1, timeout: float = WAIT_S) -> int:
    """Wait until `expected` connections LISTEN on kiwi_registry in this database; their number."""
    deadline = time.monotonic() + timeout
    while True:
        async with await psycopg.AsyncConnection.connect(database_url, autocommit=True) as conn:
            row = await (await conn.execute(LISTENERS_SQL)).fetchone()
        count = int(row[0]) if row else 0
        if count >= expected or time.monotonic() > deadline:
            return count
        await asyncio.sleep(0.05)


def publish(
    conn: psycopg.Connection,
    ref: str,
    tool_type: str = "script",
    *,
    version: str = "1.0.0",
    visibility: str = "public",
    made: list[str] | None = None,
) -> str:
    """Publish `ref` (namespace/tool_id) as an admin on `conn`; a script, directive or knowledge."""
    manifest: dict[str, Any] = {
        "tool_id": ref,
        "tool_type": tool_type,
        "version": version,
        "visibility": visibility,
        "description": f"a throwaway {tool_type} of the notification tests",
    }
    if tool_type == "knowledge":
        files = [{"path": "entry.md", "content_text": f"# {ref} {version}", "is_entrypoint": True}]
        manifest["entrypoint"] = "entry.md"
    elif tool_type == "directive":
        manifest["executor"] = "directive_runtime"
        files = [{"path": "directive.md", "content_text": f"Do {ref}.", "is_entrypoint": True}]
        manifest["entrypoint"] = "directive.md"
    else:
        manifest["executor"] = "bash_runtime"
        files = [{"path": "main.sh", "content_text": "echo '{}'", "is_entrypoint": True}]
        manifest["entrypoint"] = "main.sh"
    conn.execute("select publish_tool_version(%s, %s)", (Jsonb(manifest), Jsonb(files)))
    if made is not None and ref not in made:
        made.append(ref)
    return ref


def unique(stem: str, namespace: str = "local") -> str:
    return f"{namespace}/{stem}_{uuid.uuid4().hex[:8]}"
