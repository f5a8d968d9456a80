"""The test suite never deletes or changes what a user made in the stack's database.

Before, the suite worked in the stack's default database, the one the demo and a user's own
`kiwi` use: following the quickstart (which publishes `local/uppercase`) and then running
`pytest tests/test_docs.py` left `kiwi run local/uppercase` saying not found, and
tests/test_cli_mcp_import.py deleted a user's own `local/everything_mcp.*` import. Now the suite
works in a database of its own on the same cluster (`scripts/stack test-up`, tests/conftest.py),
and the processes it starts inherit it."""

from __future__ import annotations

import os
import time
from urllib.parse import urlsplit

import psycopg
import pytest

from runner.config import STACK_SUPERUSER_LOGIN, stack_database_url
from tests.conftest import OWN_DATABASE
from tests.inner_suite import run_inner_suite

# the tests that deleted a user's tools: the quickstart's `local/uppercase`, an import into `local`
ONCE_DELETING = ["tests/test_docs.py::test_the_quickstart_runs_as_written", "tests/test_cli_mcp_import.py"]
WRITES = (
    "select coalesce(sum(n_tup_ins + n_tup_upd + n_tup_del), 0) from pg_stat_all_tables"
    " where schemaname = 'public' and relname in ('tools', 'tool_versions', 'tool_files')"
)


@pytest.fixture
def users_database(database_url: str, pytestconfig: pytest.Config) -> str:
    """The database `kiwi` reaches with KIWI_DB_PORT alone, as a user runs it (read here, never written)."""
    if not pytestconfig.stash[OWN_DATABASE]:
        pytest.skip("KIWI_DATABASE_URL names the suite's database: there is no user's database beside it")
    return stack_database_url(login=STACK_SUPERUSER_LOGIN)


def test_the_suite_and_whatever_it_starts_use_a_database_of_their_own(database_url: str, users_database: str) -> None:
    ours, users = urlsplit(database_url), urlsplit(users_database)
    assert ours.netloc == users.netloc, "the same cluster: the stack's"
    assert ours.path != users.path, f"the suite works in {ours.path}, the user in {users.path}"
    assert os.environ["KIWI_DATABASE_URL"] == database_url, "processes the tests start inherit it"
    with psycopg.connect(database_url) as conn:
        assert conn.execute("select to_regclass('public.tools') is not null").fetchone() == (True,)


def writes_to_tools(url: str) -> int:
    """Rows ever inserted, updated or deleted in the registry's tables of that database."""
    with psycopg.connect(url, autocommit=True) as conn:
        conn.execute("select pg_stat_clear_snapshot()")
        return int(conn.execute(WRITES).fetchone()[0])


@pytest.mark.slow
def test_the_tests_that_deleted_a_users_tools_write_nothing_into_the_users_database(users_database: str) -> None:
    before = writes_to_tools(users_database)
    done = run_inner_suite(ONCE_DELETING)
    assert done.returncode == 0, done.stdout[-4000:] + done.stderr[-2000:]
    assert "passed" in done.stdout and "skipped" not in done.stdout, done.stdout[-2000:]
    time.sleep(1.5)  # a backend's table statistics reach the shared ones within a second
    assert writes_to_tools(users_database) == before, "the user's database was written to"
