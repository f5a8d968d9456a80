"""`supabase db reset && pytest` works as written: a database built only as the Supabase CLI's
reset builds it (the migrations, then the seed files supabase/config.toml names, in its order)
runs the suite's tests that need the local stack's parts, because the suite puts in what it
needs of them (tests/conftest.py local_stack_parts: the runner's login and the local owner's
namespace). Those parts stay out of every seed file, which `supabase db push --include-seed`
would also send to a hosted project."""

from __future__ import annotations

import tomllib
import uuid
from collections.abc import Iterator
from pathlib import Path

import psycopg
import pytest
from psycopg import sql

from runner import LOCAL_OWNER_ID
from tests.conftest import LOCAL_PARTS, ROOT, local_stack_parts
from tests.inner_suite import run_inner_suite

pytestmark = pytest.mark.slow

SUPABASE = ROOT / "supabase"
# Tests that failed on such a database with `namespace "local" does not exist`, one per kind:
# the CLI publishing into `local`, the local owner's identity, MCP prompts of a local directive.
ONCE_FAILING = [
    "tests/test_config_contracts.py::test_kiwi_publish_says_which_old_spellings_it_rewrote",
    "tests/security/test_acting_as_caller.py::test_the_local_owner_publishes_in_its_namespace_but_not_into_public",
    "tests/security/test_acting_as_caller.py::test_the_local_stack_creates_the_owner_the_runner_acts_as",
    "tests/mcp_server/test_prompts.py::test_get_takes_a_version_and_defaults_to_the_latest",
]


def reset_files() -> list[Path]:
    """What `supabase db reset` applies, in order: supabase/migrations/*.sql (when migrations are
    enabled), then each of [db.seed] sql_paths (globs relative to supabase/, when seeding is)."""
    config = tomllib.loads((SUPABASE / "config.toml").read_text())
    db = config.get("db", {})
    files: list[Path] = []
    if db.get("migrations", {}).get("enabled", True):
        files += sorted((SUPABASE / "migrations").glob("*.sql"))
    seed = db.get("seed", {})
    if seed.get("enabled", True):
        for pattern in seed.get("sql_paths", ["./seed.sql"]):
            files += sorted(SUPABASE.glob(pattern.removeprefix("./")))
    return files


@pytest.fixture
def reset_only(database_url: str) -> Iterator[str]:
    """A database on the stack's cluster holding exactly what a plain `supabase db reset` gives."""
    name = f"kiwi_reset_{uuid.uuid4().hex[:8]}"
    with psycopg.connect(database_url, autocommit=True) as admin:
        admin.execute(sql.SQL("create database {}").format(sql.Identifier(name)))
    url = database_url.rsplit("/", 1)[0] + "/" + name
    try:
        with psycopg.connect(url, autocommit=True) as conn:
            for file in reset_files():
                with conn.transaction():
                    conn.execute(file.read_text(encoding="utf-8"))
        yield url
    finally:
        with psycopg.connect(database_url, autocommit=True) as admin:
            admin.execute(sql.SQL("drop database {} with (force)").format(sql.Identifier(name)))


def test_the_seed_files_hold_nothing_only_the_local_stack_may_have() -> None:
    seeds = [f for f in reset_files() if f.parent == SUPABASE]
    assert [f.name for f in seeds] == ["seed.sql"]
    for file in seeds:
        text = file.read_text()
        assert LOCAL_OWNER_ID not in text and "kiwi_runner" not in text, f"{file.name} would reach a hosted project"
    assert {name for name, _ in LOCAL_PARTS} == {"local_owner.sql", "local_runner_login.sql"}


def test_the_tests_that_need_the_local_stack_pass_after_a_plain_reset(reset_only: str) -> None:
    with psycopg.connect(reset_only) as conn:
        assert conn.execute("select 1 from namespaces where namespace = 'local'").fetchone() is None, (
            "a plain reset leaves the local owner out"
        )
    done = run_inner_suite(ONCE_FAILING, KIWI_DATABASE_URL=reset_only, PYTHONPATH=str(ROOT))
    assert done.returncode == 0, done.stdout[-4000:] + done.stderr[-2000:]
    assert local_stack_parts(reset_only) == [], "the suite put the local parts in; a second look adds nothing"
