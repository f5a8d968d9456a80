"""The registry client: one typed class (`Registry`) over one seam (`Backend.call`).

    registry = connect(Settings.load())
    plan = await registry.plan("hello_world")          # a frozen Plan (core/plan.py)

`Registry` (base.py) has a method per SQL function of the registry, each a call of
`backend.call(function, args, returns=..., read=...)`; what is particular to a function
(remembered plans and gate verdicts, optional arguments left to their SQL defaults) is
written there, once. A backend carries the call, as an httpx transport a request:
`PostgresBackend` (postgres.py: psycopg pool, acting as the caller, retries, the plan
cache), `RestBackend` (rest.py: PostgREST through supabase-py), `MemoryBackend`
(memory.py: unit tests). `PostgresRegistry` and `RestRegistry` are Registry over theirs.

Each backend is imported only when chosen: supabase-py alone takes most of a second
to import, which a `kiwi run` over Postgres must not pay.
"""

from __future__ import annotations

import contextlib
from collections.abc import AsyncIterator
from typing import TYPE_CHECKING, Any

from ..config import Settings
from ..errors import UsageError
from .base import Backend, Registry, Select

if TYPE_CHECKING:
    from .postgres import PostgresRegistry
    from .rest import RestRegistry

__all__ = ["Backend", "PostgresRegistry", "Registry", "RestRegistry", "Select", "connect", "opened"]


def __getattr__(name: str) -> Any:
    if name == "PostgresRegistry":
        from .postgres import PostgresRegistry

        return PostgresRegistry
    if name == "RestRegistry":
        from .rest import RestRegistry

        return RestRegistry
    raise AttributeError(name)


def connect(settings: Settings, *, one_shot: bool = False) -> Registry:
    """The registry the settings name, acting as the principal they name (runner/principal.py:
    explicit admin, else KIWI_ACCESS_TOKEN's user, else the local owner on Postgres and anon
    over REST); nothing is opened until the first call.

    `one_shot`: for a command that makes a few calls and exits (`kiwi run`, `show`, `search`).
    Over Postgres it holds one connection (max_size=1: no pool, psycopg_pool never imported)
    and no plan cache, whose LISTEN connection would be a second connection and a second
    password exchange on the second plan or verdict asked for (a plain `kiwi run` asks two)."""
    if settings.backend == "rest":
        if not (settings.supabase_url and settings.supabase_key):
            raise UsageError(
                "the rest backend needs SUPABASE_URL and a key",
                hint="set SUPABASE_URL and SUPABASE_KEY (or SUPABASE_ANON_KEY)",
            )
        from ..supabase_auth.renewal import renewer_of
        from .rest import RestRegistry

        token = settings.supabase_access_token
        return RestRegistry(settings.supabase_url, settings.supabase_key, access_token=token, renew=renewer_of(token))
    if settings.backend == "postgres":
        from .postgres import PostgresRegistry

        if one_shot:
            return PostgresRegistry(
                settings.database_url, principal=settings.principal(), max_size=1, cache_plans=False
            )
        return PostgresRegistry(settings.database_url, principal=settings.principal())
    raise UsageError(f"unknown backend {settings.backend!r}", hint="KIWI_BACKEND is postgres or rest")


@contextlib.asynccontextmanager
async def opened(settings: Settings | None = None, *, one_shot: bool = False) -> AsyncIterator[Registry]:
    """The configured registry (Settings.load() by default), closed after the calls made in the block."""
    registry = connect(settings or Settings.load(), one_shot=one_shot)
    try:
        yield registry
    finally:
        await registry.aclose()
