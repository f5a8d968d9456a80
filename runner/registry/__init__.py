"""The registry client: one interface (`Registry`), two carriers (Postgres, Supabase REST).

registry = connect(Settings.load())
plan = await registry.execution_plan("hello_world")
"""

from __future__ import annotations

from ..config import Settings
from ..errors import UsageError
from .base import Registry
from .postgres import PostgresRegistry
from .rest import RestRegistry

__all__ = ["PostgresRegistry", "Registry", "RestRegistry", "connect"]


def connect(settings: Settings) -> Registry:
    """The registry the settings name; nothing is opened until the first call."""
    if settings.backend == "rest":
        if not (settings.supabase_url and settings.supabase_key):
            raise UsageError(
                "the rest backend needs SUPABASE_URL and a key",
                hint="set SUPABASE_URL and SUPABASE_KEY (or SUPABASE_ANON_KEY)",
            )
        return RestRegistry(settings.supabase_url, settings.supabase_key)
    if settings.backend == "postgres":
        return PostgresRegistry(settings.database_url)
    raise UsageError(f"unknown backend {settings.backend!r}", hint="KIWI_BACKEND is postgres or rest")
