"""The migrations apply to an empty PostgreSQL and beside what Supabase already provides."""

from __future__ import annotations

import uuid
from collections.abc import Iterator
from datetime import datetime
from pathlib import Path

import psycopg
import pytest
from psycopg import sql

from tests.conftest import ROOT

MIGRATIONS = sorted((ROOT / "supabase" / "migrations").glob("*.sql"))


def apply(url: str, files: list[Path]) -> None:
    """Apply SQL files in order, one transaction each, as `supabase db reset` does."""
    with psycopg.connect(url, autocommit=True) as conn:
        for file in files:
            with conn.transaction():
                conn.execute(file.read_text(encoding="utf-8"))


@pytest.fixture
def scratch_db(database_url: str) -> Iterator[str]:
    name = f"kiwi_migrations_{uuid.uuid4().hex[:8]}"
    with psycopg.connect(database_url, autocommit=True) as admin:
        admin.execute(sql.SQL("create database {}").format(sql.Identifier(name)))
    try:
        yield database_url.rsplit("/", 1)[0] + "/" + name
    finally:
        with psycopg.connect(database_url, autocommit=True) as admin:
            admin.execute(sql.SQL("drop database {} with (force)").format(sql.Identifier(name)))


def test_migration_names_follow_the_supabase_convention() -> None:
    """<YYYYMMDDHHMMSS>_<name>.sql, the stamp a real UTC time (no minute 60, no second 60)."""
    assert MIGRATIONS
    for file in MIGRATIONS:
        stamp, _, name = file.stem.partition("_")
        assert len(stamp) == 14 and stamp.isdigit() and name, file.name
        datetime.strptime(stamp, "%Y%m%d%H%M%S")  # raises on an impossible time


def test_migrations_and_seed_apply_to_an_empty_database(scratch_db: str) -> None:
    apply(scratch_db, [*MIGRATIONS, ROOT / "supabase" / "seed.sql"])
    with psycopg.connect(scratch_db) as conn:
        chain = [r[0] for r in conn.execute("select tool_id from resolve_executor_chain('hello_world')")]
    assert chain == ["hello_world", "bash_runtime", "subprocess"]


def test_supabase_provided_auth_functions_are_kept(scratch_db: str) -> None:
    """On a real Supabase project auth.uid() already exists: the migrations must not replace it."""
    with psycopg.connect(scratch_db, autocommit=True) as conn:
        conn.execute(
            "create schema auth;"
            " create function auth.uid() returns uuid language sql stable as"
            " $$ select nullif(current_setting('request.jwt.claim.sub', true), '')::uuid $$;"
            " comment on function auth.uid() is 'provided by supabase';"
        )
    apply(scratch_db, MIGRATIONS)
    with psycopg.connect(scratch_db) as conn:
        comment = conn.execute("select obj_description('auth.uid()'::regprocedure)").fetchone()[0]
        assert comment == "provided by supabase"
        assert conn.execute("select to_regprocedure('auth.jwt()') is not null").fetchone()[0]


def test_auth_helpers_read_the_claims_postgrest_sets(conn: psycopg.Connection) -> None:
    with conn.transaction():
        conn.execute(
            "select set_config('request.jwt.claims',"
            ' \'{"sub": "00000000-0000-4000-8000-000000000001", "role": "authenticated"}\', true)'
        )
        uid, role, jwt = conn.execute("select auth.uid(), auth.role(), auth.jwt() ->> 'sub'").fetchone()
    assert str(uid) == "00000000-0000-4000-8000-000000000001"
    assert role == "authenticated"
    assert jwt == str(uid)
