"""The Supabase CLI's `db push` takes the registry to an empty database, as it would to a project.

`supabase db push` is how the migrations reach a hosted project, so it is run here,
unmodified, against a FRESH database on the embedded cluster (`kiwi_push_<random>`,
dropped afterwards even on failure). The Supabase roles (anon, authenticated,
service_role) are cluster-wide and already exist, as on a project.

Facts about the CLI (3.1.0) these tests rely on, each checked with `--help`:
* `db push` and `migration list` target the LOCAL stack by default; `--remote=<url>`
  targets any database (`--db-url` still works but is deprecated, "removed in v4").
* The host is spelled `127.1`: the CLI treats `127.0.0.1` on its own db port as its Docker stack.
* `--workdir DIR` is the directory holding `supabase/`, used as given. The push runs on
  a temporary copy of `supabase/`, so the CLI's `supabase/.temp/` lands there and the
  files pushed cannot change under the test while others edit the tree.
* `--output-format json` prints one JSON object on stdout (progress goes to stderr).
"""

from __future__ import annotations

import json
import shutil
import subprocess
import uuid
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import psycopg
import pytest
from psycopg import sql

from tests.conftest import ROOT

SUPABASE = ROOT / "node_modules" / ".bin" / "supabase"


@dataclass
class Pushed:
    """A fresh database after `db push --include-seed`, with what the CLI said."""

    url: str  # for psycopg
    cli_url: str  # the same database, spelled for the CLI
    workdir: Path
    versions: list[str]  # of the migration files pushed, in order
    dry_run: dict[str, Any]
    dry_run_left_schema: bool
    first: dict[str, Any]


def supabase(workdir: Path, *args: str) -> dict[str, Any]:
    """Run the CLI with JSON output; a failure shows its stderr."""
    assert SUPABASE.exists(), "the Supabase CLI is missing: run `make deps`"
    result = subprocess.run(
        [str(SUPABASE), *args, "--workdir", str(workdir), "--output-format", "json"],
        cwd=ROOT,
        capture_output=True,
        text=True,
        timeout=180,
        check=False,
    )
    assert result.returncode == 0, f"supabase {' '.join(args)} failed:\n{result.stdout}\n{result.stderr}"
    return json.loads(result.stdout)


def copy_project(into: Path) -> Path:
    """A snapshot of supabase/ (without the CLI's state) to push from."""
    shutil.copytree(ROOT / "supabase", into / "supabase", ignore=shutil.ignore_patterns(".temp", ".branches"))
    return into


@pytest.fixture(scope="module")
def pushed(database_url: str, tmp_path_factory: pytest.TempPathFactory) -> Iterator[Pushed]:
    name = f"kiwi_push_{uuid.uuid4().hex[:10]}"
    base, _, _ = database_url.rpartition("/")
    url = f"{base}/{name}"
    cli_url = f"{url.replace('@127.0.0.1:', '@127.1:').replace('@localhost:', '@127.1:')}?sslmode=disable"
    workdir = copy_project(tmp_path_factory.mktemp("push"))
    versions = [p.name.partition("_")[0] for p in sorted((workdir / "supabase" / "migrations").glob("*.sql"))]
    with psycopg.connect(database_url, autocommit=True) as admin:
        admin.execute(sql.SQL("create database {}").format(sql.Identifier(name)))
    try:
        dry_run = supabase(workdir, "db", "push", f"--remote={cli_url}", "--include-seed", "--dry-run", "--yes")
        with psycopg.connect(url) as conn:
            left = conn.execute("select to_regclass('public.tools') is not null").fetchone()[0]
        first = supabase(workdir, "db", "push", f"--remote={cli_url}", "--include-seed", "--yes")
        yield Pushed(url, cli_url, workdir, versions, dry_run, left, first)
    finally:
        with psycopg.connect(database_url, autocommit=True) as admin:
            admin.execute(sql.SQL("drop database if exists {} with (force)").format(sql.Identifier(name)))


def test_a_dry_run_lists_every_migration_and_the_seed_and_applies_nothing(pushed: Pushed) -> None:
    assert pushed.dry_run["dryRun"] is True
    assert [m.partition("_")[0] for m in pushed.dry_run["migrations"]] == pushed.versions
    assert pushed.dry_run["seeds"] == ["supabase/seed.sql"]
    assert pushed.dry_run_left_schema is False


def test_push_applies_and_records_every_migration_in_order(pushed: Pushed) -> None:
    assert pushed.first["upToDate"] is False and pushed.first["dryRun"] is False
    assert [m.partition("_")[0] for m in pushed.first["migrations"]] == pushed.versions
    assert pushed.first["seeds"] == ["supabase/seed.sql"]
    with psycopg.connect(pushed.url) as conn:
        recorded = [v for (v,) in conn.execute("select version from supabase_migrations.schema_migrations order by 1")]
    assert recorded == pushed.versions


def test_the_seed_is_loaded_and_hello_world_resolves(pushed: Pushed) -> None:
    with psycopg.connect(pushed.url) as conn:
        chain = [r[0] for r in conn.execute("select tool_id from resolve_executor_chain('hello_world') order by depth")]
        seeds = [p for (p,) in conn.execute("select path from supabase_migrations.seed_files")]
    assert chain == ["hello_world", "bash_runtime", "subprocess"]
    assert seeds == ["supabase/seed.sql"], "the CLI records the seed's hash, so a second push does not reseed"


def test_pushing_again_is_a_no_op(pushed: Pushed) -> None:
    count = "select (select count(*) from tool_versions), (select count(*) from supabase_migrations.schema_migrations)"
    with psycopg.connect(pushed.url) as conn:
        before = conn.execute(count).fetchone()
    again = supabase(pushed.workdir, "db", "push", f"--remote={pushed.cli_url}", "--include-seed", "--yes")
    assert again["upToDate"] is True, again
    assert "up to date" in again["message"]
    assert again["migrations"] == [] and again["seeds"] == []
    with psycopg.connect(pushed.url) as conn:
        assert conn.execute(count).fetchone() == before


def test_migration_list_shows_local_and_remote_aligned(pushed: Pushed) -> None:
    listed = supabase(pushed.workdir, "migration", "list", f"--remote={pushed.cli_url}")
    rows = listed["migrations"]
    assert [r["local"] for r in rows] == pushed.versions
    assert [r["remote"] for r in rows] == pushed.versions
