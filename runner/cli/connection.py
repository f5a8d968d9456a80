"""The registry a one-shot `kiwi` command talks to: over Postgres, one connection and no pool.

A command such as `kiwi run`, `show` or `search` makes a few calls, mostly in turn, and exits:
the Postgres backend then holds one connection (`max_size=1`, runner/registry/postgres.py),
psycopg_pool is never imported, and no plan cache opens its LISTEN connection (a second
connection, and a second password exchange, on the second plan or gate verdict asked for: a
plain `kiwi run` asks for two). Over REST the registry is registry.connect()'s. Long-lived
commands (`kiwi serve`, `kiwi mcp`) and `kiwi embed` keep the pool and the cache.
"""

from __future__ import annotations

import contextlib
from collections.abc import AsyncIterator
from typing import TYPE_CHECKING

if TYPE_CHECKING:
    from ..config import Settings
    from ..registry.base import Registry


def connect_once(settings: Settings) -> Registry:
    """registry.connect(settings), over Postgres with one connection and no plan cache."""
    if settings.backend == "postgres":
        from ..registry.postgres import PostgresRegistry

        return PostgresRegistry(settings.database_url, principal=settings.principal(), max_size=1, cache_plans=False)
    from ..registry import connect

    return connect(settings)


@contextlib.asynccontextmanager
async def opened_once(settings: Settings | None = None) -> AsyncIterator[Registry]:
    """The configured registry (Settings.load() by default) for one command, closed after its calls."""
    from ..config import Settings

    registry = connect_once(settings or Settings.load())
    try:
        yield registry
    finally:
        await registry.aclose()
