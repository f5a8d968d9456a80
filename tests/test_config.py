"""Runner settings: environment, then config.toml, then the local defaults (runner/config.py)."""

from __future__ import annotations

from pathlib import Path

import pytest

from runner.config import DEFAULT_DATABASE_URL, Settings
from runner.errors import UsageError


def test_defaults_point_at_the_local_stack(tmp_path: Path) -> None:
    s = Settings.load({"HOME": str(tmp_path)}, tmp_path / "absent.toml")
    assert s.backend == "postgres" and s.database_url == DEFAULT_DATABASE_URL
    assert s.cache_dir == tmp_path / ".cache" / "kiwi" and s.record_runs


def test_the_environment_wins_over_the_file(tmp_path: Path) -> None:
    cfg = tmp_path / "config.toml"
    cfg.write_text('[database]\nurl = "postgresql://file/db"\n[cache]\ndir = "/from/file"\n[runs]\nrecord = false\n')
    from_file = Settings.load({}, cfg)
    assert from_file.database_url == "postgresql://file/db" and from_file.cache_dir == Path("/from/file")
    assert from_file.record_runs is False
    s = Settings.load({"KIWI_DATABASE_URL": "postgresql://env/db", "KIWI_CACHE_DIR": "/from/env"}, cfg)
    assert s.database_url == "postgresql://env/db" and s.cache_dir == Path("/from/env")


def test_supabase_url_alone_selects_the_rest_backend(tmp_path: Path) -> None:
    env = {"SUPABASE_URL": "https://x.supabase.co", "SUPABASE_ANON_KEY": "k"}
    assert Settings.load(env, tmp_path / "none").backend == "rest"
    assert Settings.load({**env, "KIWI_DATABASE_URL": "postgresql://h/db"}, tmp_path / "none").backend == "postgres"


def test_bad_settings_are_clear_errors(tmp_path: Path) -> None:
    with pytest.raises(UsageError, match="unknown backend 'mysql'"):
        Settings.load({"KIWI_BACKEND": "mysql"}, tmp_path / "none")
    with pytest.raises(UsageError, match="needs SUPABASE_URL and a key"):
        Settings.load({"KIWI_BACKEND": "rest", "SUPABASE_URL": "https://x.supabase.co"}, tmp_path / "none")
    bad = tmp_path / "config.toml"
    bad.write_text("[database\n")
    with pytest.raises(UsageError, match=r"config\.toml"):
        Settings.load({}, bad)


def test_the_repository_config_file_is_valid_and_changes_no_default() -> None:
    root = Path(__file__).resolve().parent.parent
    s = Settings.load({"HOME": "/h"}, root / "config.toml")
    assert s == Settings.load({"HOME": "/h"}, root / "absent.toml")
