"""Runner settings: environment first, then config.toml, then the local defaults.

Environment variables:
  KIWI_DATABASE_URL        direct Postgres backend (default: the local stack)
  SUPABASE_URL, SUPABASE_KEY (or SUPABASE_SERVICE_ROLE_KEY / SUPABASE_ANON_KEY)
                           the Supabase REST backend, used when KIWI_BACKEND=rest or
                           when SUPABASE_URL is set and KIWI_DATABASE_URL is not
  KIWI_CACHE_DIR           materialised tools and prepared environments
  KIWI_CONFIG              path of config.toml (default: ./config.toml, if present)
"""

from __future__ import annotations

import os
import tomllib
from collections.abc import Mapping
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from .errors import UsageError

DEFAULT_DATABASE_URL = "postgresql://postgres:postgres@127.0.0.1:54322/postgres"


@dataclass(frozen=True)
class Settings:
    backend: str  # "postgres" | "rest"
    database_url: str
    supabase_url: str | None
    supabase_key: str | None
    cache_dir: Path
    record_runs: bool = True

    @classmethod
    def load(cls, environ: Mapping[str, str] | None = None, config_path: Path | None = None) -> Settings:
        env = os.environ if environ is None else environ
        file = _read_config(config_path or Path(env.get("KIWI_CONFIG", "config.toml")))
        db = file.get("database", {})
        rest = file.get("supabase", {})
        cache = file.get("cache", {})
        runs = file.get("runs", {})
        supabase_url = env.get("SUPABASE_URL") or rest.get("url")
        supabase_key = (
            env.get("SUPABASE_KEY")
            or env.get("SUPABASE_SERVICE_ROLE_KEY")
            or env.get("SUPABASE_ANON_KEY")
            or rest.get("key")
        )
        explicit_db = env.get("KIWI_DATABASE_URL") or db.get("url")
        backend = env.get("KIWI_BACKEND") or file.get("backend")
        if backend is None:
            backend = "rest" if supabase_url and not explicit_db else "postgres"
        if backend not in ("postgres", "rest"):
            raise UsageError(f"unknown backend {backend!r}", hint="KIWI_BACKEND is postgres or rest")
        if backend == "rest" and not (supabase_url and supabase_key):
            raise UsageError(
                "the rest backend needs SUPABASE_URL and a key",
                hint="set SUPABASE_URL and SUPABASE_KEY (or SUPABASE_ANON_KEY)",
            )
        cache_dir = Path(env.get("KIWI_CACHE_DIR") or cache.get("dir") or _default_cache(env)).expanduser()
        return cls(
            backend=backend,
            database_url=explicit_db or DEFAULT_DATABASE_URL,
            supabase_url=supabase_url,
            supabase_key=supabase_key,
            cache_dir=cache_dir,
            record_runs=bool(runs.get("record", True)),
        )


def _default_cache(env: Mapping[str, str]) -> str:
    base = env.get("XDG_CACHE_HOME") or str(Path(env.get("HOME", "~")) / ".cache")
    return str(Path(base) / "kiwi")


def _read_config(path: Path) -> dict[str, Any]:
    if not path.is_file():
        return {}
    try:
        return tomllib.loads(path.read_text())
    except tomllib.TOMLDecodeError as e:
        raise UsageError(f"{path}: {e}", hint="fix the TOML syntax") from e
