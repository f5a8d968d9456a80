"""`kiwi mcp import` as a newcomer types it: a public server's tools cannot go into `public`
without --admin, and the command says so in one line with the way out; `--namespace` is that way.

Real processes, the real database, the seeded everything_mcp server (its node_modules here)."""

from __future__ import annotations

from collections.abc import Callable, Iterator
from pathlib import Path

import psycopg
import pytest

from tests.conftest import ROOT
from tests.kiwi_cli import Done, kiwi_env, run_kiwi

Kiwi = Callable[..., Done]


@pytest.fixture
def kiwi(database_url: str, tmp_path: Path) -> Kiwi:
    """`kiwi(*args)`: the CLI as the local stack's owner (no --admin), the server's node_modules found."""
    env = kiwi_env(database_url, tmp_path / "cache", KIWI_NODE_MODULES=str(ROOT / "node_modules"))

    def run(*args: str) -> Done:
        return run_kiwi(args, cwd=tmp_path, env=env, timeout=120)

    return run


@pytest.fixture
def imported_into_local(conn: psycopg.Connection) -> Iterator[None]:
    """`local` without everything_mcp's tools before and after: an import a run killed midway left
    behind must not fail the next. The suite's own database (tests/conftest.py), so these are
    never a user's own imports."""
    conn.execute("delete from tools where ref like 'local/everything_mcp.%'")
    yield
    conn.execute("delete from tools where ref like 'local/everything_mcp.%'")


def test_importing_a_public_server_without_admin_fails_in_one_line_naming_the_fix(
    kiwi: Kiwi, conn: psycopg.Connection
) -> None:
    before = conn.execute("select count(*) from tools where executor_id = 'everything_mcp'").fetchone()
    done = kiwi("mcp", "import", "everything_mcp")
    assert done.code == 4, "refused, as the CLI's other refusals (runner/cli/main.py)"
    assert done.out == "", "no tool was imported: nothing to list"
    error, hint = done.err.strip().splitlines()
    assert error.startswith("kiwi: 13 of 13 tools of everything_mcp not imported: everything_mcp.echo: ")
    assert error.endswith('you cannot publish into namespace "public" (and 12 more like it)')
    assert "kiwi --admin mcp import everything_mcp" in hint
    assert "kiwi mcp import everything_mcp --namespace local" in hint, "the caller's own namespace, by name"
    after = conn.execute("select count(*) from tools where executor_id = 'everything_mcp'").fetchone()
    assert after == before


def test_json_keeps_every_reason_and_the_refusals_exit_code(kiwi: Kiwi) -> None:
    done = kiwi("mcp", "import", "everything_mcp", "--json")
    assert done.code == 4
    report = done.json()
    assert report["ok"] is False and report["counts"] == {"error": 13}
    assert all("namespace" in t["error"] for t in report["tools"])


def test_namespace_imports_a_public_servers_tools_into_the_callers_namespace(
    kiwi: Kiwi, conn: psycopg.Connection, imported_into_local: None
) -> None:
    done = kiwi("mcp", "import", "everything_mcp", "--namespace", "local")
    assert done.code == 0, done.err
    assert "created   local/everything_mcp.echo@1.0.0" in done.out.splitlines()
    assert done.err.strip().endswith("everything_mcp: 13 created")
    row = conn.execute("select executor_id, tool_type from tools where ref = 'local/everything_mcp.echo'").fetchone()
    assert row == ("everything_mcp", "mcp_tool"), "the tool runs on the public server"
    ran = kiwi("run", "local/everything_mcp.echo", "-p", "message=hi")
    assert ran.code == 0, ran.err
    assert ran.out.strip() == "Echo: hi"
    again = kiwi("mcp", "import", "everything_mcp", "--namespace", "local")
    assert again.code == 0 and "unchanged local/everything_mcp.echo@1.0.0" in again.out.splitlines()
