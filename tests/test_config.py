"""Runner settings: environment, then config.toml, then the local defaults (runner/config.py)."""

from __future__ import annotations

from pathlib import Path

import pytest

from runner import Settings, UsageError
from runner.config import stack_database_url


def test_defaults_point_at_the_local_stack(tmp_path: Path) -> None:
    s = Settings.load({"HOME": str(tmp_path)}, tmp_path / "absent.toml")
    assert s.backend == "postgres" and s.database_url == stack_database_url({})
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


# --- who the settings act as (runner/principal.py) -----------------------------------------------


def test_the_principal_is_the_local_owner_on_postgres_anon_over_rest_and_admin_only_when_asked(
    tmp_path: Path,
) -> None:
    from runner import LOCAL_OWNER_ID

    none = tmp_path / "none.toml"
    local = Settings.load({}, none).principal()
    assert (local.role, local.user_id, local.source) == ("authenticated", LOCAL_OWNER_ID, "local owner")
    rest = Settings.load({"SUPABASE_URL": "https://x.supabase.co", "SUPABASE_ANON_KEY": "k"}, none).principal()
    assert rest.role == "anon"
    for yes in ("1", "true", "YES"):
        assert Settings.load({"KIWI_ADMIN": yes}, none).principal().is_admin
    for no in ("", "0", "false", "no"):
        assert not Settings.load({"KIWI_ADMIN": no}, none).principal().is_admin
    with pytest.raises(UsageError, match="KIWI_ADMIN='maybe' is not a yes or no"):
        Settings.load({"KIWI_ADMIN": "maybe"}, none)


def test_a_token_is_verified_with_the_projects_secret_known_only_for_a_local_database(tmp_path: Path) -> None:
    import uuid

    from runner import LOCAL_JWT_SECRET, Refused
    from runner import sign_token as sign

    none = tmp_path / "none.toml"
    user = str(uuid.uuid4())
    token = sign({"sub": user, "role": "authenticated", "aud": "authenticated"}, LOCAL_JWT_SECRET)
    assert Settings.load({"KIWI_ACCESS_TOKEN": token}, none).principal().user_id == user
    hosted = {"KIWI_ACCESS_TOKEN": token, "KIWI_DATABASE_URL": "postgresql://u:p@db.example.supabase.co/postgres"}
    assert Settings.load(hosted, none).jwt_secret is None, "a remote project's secret is never guessed"
    with pytest.raises(UsageError, match="no JWT secret is configured"):
        Settings.load(hosted, none).principal()
    mine = sign(
        {"sub": user, "role": "authenticated", "aud": "authenticated"}, "the-hosted-projects-secret-0123456789abcdef"
    )
    ok = Settings.load(
        {**hosted, "KIWI_ACCESS_TOKEN": mine, "KIWI_JWT_SECRET": "the-hosted-projects-secret-0123456789abcdef"}, none
    )
    assert ok.principal().user_id == user
    with pytest.raises(Refused, match="Signature verification failed"):
        Settings.load({**hosted, "KIWI_JWT_SECRET": "the-hosted-projects-secret-0123456789abcdef"}, none).principal()
    odd = sign({"sub": user, "role": "postgres"}, LOCAL_JWT_SECRET)
    with pytest.raises(Refused, match="role 'postgres' is not one Kiwi acts as"):
        Settings.load({"KIWI_ACCESS_TOKEN": odd}, none).principal()
    assert Settings.load({"SUPABASE_URL": "https://x.supabase.co/", "SUPABASE_ANON_KEY": "k"}, none).jwks_url == (
        "https://x.supabase.co/auth/v1/.well-known/jwks.json"
    )
