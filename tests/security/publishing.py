"""A signed-in user publishing through SQL, in one transaction that is rolled back.

What the registry refuses at publish is reproduced as a tenant does it: `select
publish_tool_version(...)` with the JWT claims PostgREST would set, as `authenticated`, into a
throwaway namespace the user owns. Nothing outlives the test.
"""

from __future__ import annotations

import json
import uuid
from collections.abc import Iterator
from contextlib import contextmanager
from dataclasses import dataclass
from typing import Any

import psycopg
import pytest
from psycopg.types.json import Jsonb


@dataclass(frozen=True)
class Publisher:
    """A signed-in user acting in one rolled-back transaction, owner of namespace `ns`."""

    conn: psycopg.Connection
    user: uuid.UUID
    ns: str

    def act(self, role: str = "authenticated", user: uuid.UUID | None = None) -> None:
        """Act as `role` (as `user`, else this publisher, when authenticated)."""
        sub = {"sub": str(user or self.user)} if role == "authenticated" else {}
        self.conn.execute(
            "select set_config('request.jwt.claims', %s, true), set_config('role', %s, true)",
            (json.dumps({"role": role, **sub}), role),
        )

    def admin(self) -> None:
        """Act as the superuser (an admin: caller_is_admin)."""
        self.conn.execute("select set_config('role', 'none', true), set_config('request.jwt.claims', '', true)")

    def manifest(self, **fields: Any) -> dict[str, Any]:
        return {
            "tool_id": f"{self.ns}/t_{uuid.uuid4().hex[:6]}",
            "tool_type": "script",
            "executor": "bash_runtime",
            "version": "1.0.0",
            **fields,
        }

    def publish(self, manifest: dict[str, Any], files: list[dict[str, Any]] | None = None) -> Any:
        row = self.conn.execute(
            "select publish_tool_version(%s, %s)", (Jsonb(manifest), Jsonb(files if files is not None else [script()]))
        ).fetchone()
        return row[0] if row else None

    def refusal(
        self, manifest: dict[str, Any], files: list[dict[str, Any]] | None = None, sqlstate: str = "22023"
    ) -> str:
        """The message of the error (`sqlstate`) this publish raises; the transaction goes on."""
        with pytest.raises(psycopg.Error) as raised, self.conn.transaction():
            self.publish(manifest, files)
        assert raised.value.sqlstate == sqlstate, f"{raised.value.sqlstate}: {raised.value}"
        return str(raised.value.diag.message_primary)

    def one(self, sql: str, *args: Any) -> Any:
        row = self.conn.execute(sql, args).fetchone()
        return row[0] if row else None


def script(path: str = "run.sh", text: str = "echo hi", **fields: Any) -> dict[str, Any]:
    return {"path": path, "content_text": text, **fields}


@contextmanager
def publishing(database_url: str) -> Iterator[Publisher]:
    """A Publisher with a namespace of its own, everything rolled back at the end."""
    with psycopg.connect(database_url, autocommit=True) as conn, conn.transaction(force_rollback=True):
        p = Publisher(conn, uuid.uuid4(), f"pub_{uuid.uuid4().hex[:8]}")
        conn.execute("insert into namespaces (namespace, owner_id) values (%s, %s)", (p.ns, p.user))
        p.act()
        yield p
