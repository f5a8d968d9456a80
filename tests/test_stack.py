"""scripts/stack, the embedded stack's bring-up, on a fresh checkout of itself.

A real reset would disturb the database the suite runs on, so these tests give the script
fakes (named as such) for what it would act on: a `pg_isready` that says a server answers,
a PostgreSQL bin folder, a cluster directory, and a Supabase CLI that records its
arguments. The script's own logic is what runs for real. A real foreign PostgreSQL is in
tests/security/test_the_stack_never_touches_a_database_it_did_not_create.py.
"""

from __future__ import annotations

import os
import shutil
import subprocess
import tempfile
from collections.abc import Iterator
from pathlib import Path

import pytest

from tests.conftest import ROOT

FAKE = "#!/usr/bin/env bash\n"


@pytest.fixture
def tmp_path() -> Iterator[Path]:
    """A folder the `postgres` user can reach too: as root the script runs PostgreSQL's tools as
    that user (pytest's own tmp_path sits under a folder only root may enter)."""
    folder = Path(tempfile.mkdtemp(prefix="kiwi-stack-test-"))
    folder.chmod(0o755)
    yield folder
    shutil.rmtree(folder, ignore_errors=True)


def fake_checkout(tmp_path: Path) -> Path:
    """A checkout holding just what `scripts/stack` reads, and fakes for what it runs."""
    checkout = tmp_path / "checkout"
    (checkout / "scripts").mkdir(parents=True)
    shutil.copy2(ROOT / "scripts" / "stack", checkout / "scripts" / "stack")
    shutil.copytree(ROOT / "supabase" / "migrations", checkout / "supabase" / "migrations")
    shutil.copy2(ROOT / "supabase" / "seed.sql", checkout / "supabase" / "seed.sql")
    shutil.copy2(ROOT / "supabase" / "local_owner.sql", checkout / "supabase" / "local_owner.sql")
    shutil.copy2(ROOT / "supabase" / "local_runner_login.sql", checkout / "supabase" / "local_runner_login.sql")
    pgmq = checkout / ".venv" / "lib" / "python3.11" / "site-packages" / "pgmq" / "sql"  # the pgmq package's SQL
    pgmq.mkdir(parents=True)
    (pgmq / "pgmq.sql").write_text("-- pgmq, as the package ships it\n")
    (pgmq / "VERSION").write_text("1.13.0\n")
    cli = checkout / "node_modules" / ".bin" / "supabase"
    cli.parent.mkdir(parents=True)
    cli.write_text(FAKE + 'printf "%s\\n" "$@" >"$(dirname "$0")/../../supabase-args"\n')
    pgbin = tmp_path / "pgbin"
    pgbin.mkdir()
    (pgbin / "pg_isready").write_text(FAKE + "exit 0\n")  # "a PostgreSQL already answers"
    (pgbin / "initdb").write_text(FAKE + "exit 1\n")  # must never be needed
    (pgbin / "pg_ctl").write_text(FAKE + "exit 3\n")  # "not running"
    (pgbin / "psql").write_text(FAKE + 'printf "%s\\n" "$@" >"$(dirname "$0")/psql-args"\n')  # records what it applies
    for tool in [cli, *pgbin.iterdir()]:
        tool.chmod(0o755)
    return checkout


def run_stack(checkout: Path, *args: str, port: str = "1") -> subprocess.CompletedProcess[str]:
    # psql is the real one, pointed at a port nobody listens on: "no schema yet", so a reset
    env = {**os.environ, "KIWI_PGBIN": str(checkout.parent / "pgbin"), "KIWI_DB_PORT": port}
    return subprocess.run(
        [str(checkout / "scripts" / "stack"), *args], env=env, capture_output=True, text=True, timeout=60
    )


def fake_own_cluster(checkout: Path, port: str = "1") -> Path:
    """A cluster as init_cluster leaves it for `port`, running (the fake pg_ctl says so)."""
    data = checkout / ".kiwi" / "pg" / port / "data"
    data.mkdir(parents=True)
    (data / "PG_VERSION").write_text("18\n")
    (data / "postgresql.conf").write_text(f"# --- kiwi embedded stack ---\nport = {port}\n")
    (data / "postmaster.pid").write_text(f"4242\n{data}\n1700000000\n{port}\n")
    pgbin = checkout.parent / "pgbin"
    (pgbin / "pg_ctl").write_text(FAKE + "exit 0\n")  # "running"
    (pgbin / "postgres").write_text(FAKE + 'echo "postgres (PostgreSQL) 18.1"\n')
    (pgbin / "postgres").chmod(0o755)
    return data


def test_up_refuses_a_postgres_it_did_not_start_and_resets_nothing(tmp_path: Path) -> None:
    """Regression: with another PostgreSQL on the port the stack said "using it" and ran
    `supabase db reset` against it. Now it refuses, says how to pick another port, and runs
    neither the reset nor psql."""
    checkout = fake_checkout(tmp_path)
    done = run_stack(checkout, "up")
    assert done.returncode != 0
    assert "did not start already answers on 127.0.0.1:1" in done.stderr
    assert "export KIWI_DB_PORT=" in done.stderr and "using it" not in done.stderr
    assert not (checkout / "supabase-args").exists(), "no reset"
    assert not (tmp_path / "pgbin" / "psql-args").exists(), "no roles, no SQL"
    assert not (checkout / ".kiwi" / "pg" / "1").exists(), "no cluster, log or stamp for that port"
    reset = run_stack(checkout, "reset")
    assert reset.returncode != 0 and "did not start" in reset.stderr
    assert not (checkout / "supabase-args").exists()


def test_a_data_directory_the_stack_did_not_mark_is_neither_started_nor_reset(tmp_path: Path) -> None:
    checkout = fake_checkout(tmp_path)
    data = fake_own_cluster(checkout)
    (data / "postgresql.conf").write_text("port = 1\n")  # no mark: not made by init_cluster
    (tmp_path / "pgbin" / "pg_isready").write_text(FAKE + "exit 2\n")  # nothing answers
    done = run_stack(checkout, "up")
    assert done.returncode != 0 and "did not create" in done.stderr
    assert not (checkout / "supabase-args").exists()


@pytest.mark.slow
def test_the_runner_login_is_part_of_what_makes_the_stack_current(tmp_path: Path) -> None:
    """A change to the runner's login file resets the stack's own cluster, as a migration does,
    and `runner-url` names that login on the stack's port."""
    checkout = fake_checkout(tmp_path)
    fake_own_cluster(checkout)
    first = run_stack(checkout, "up")
    assert first.returncode == 0, first.stderr
    args = (checkout / "supabase-args").read_text().split()
    assert args[:2] == ["db", "reset"] and "--yes" in args
    assert "--remote=postgresql://postgres:postgres@127.1:1/postgres?sslmode=disable" in args
    applied = (tmp_path / "pgbin" / "psql-args").read_text().split()
    assert str(checkout / "supabase" / "local_owner.sql") in applied, "the local owner is created after the reset"
    assert str(checkout / "supabase" / "local_runner_login.sql") in applied, "and the runner's login"
    stamp_file = checkout / ".kiwi" / "pg" / "1" / "reset.sha256"
    stamp = stamp_file.read_text()
    with (checkout / "supabase" / "local_runner_login.sql").open("a") as f:
        f.write("-- changed\n")
    assert run_stack(checkout, "up").returncode == 0
    assert stamp_file.read_text() != stamp
    url = run_stack(checkout, "runner-url").stdout.strip()
    assert url == "postgresql://kiwi_runner:kiwi_runner@127.0.0.1:1/postgres"


def test_each_port_has_its_own_cluster_and_stamp(tmp_path: Path) -> None:
    """A stack on port 2 neither sees nor resets port 1's cluster: its own data, log and stamp."""
    checkout = fake_checkout(tmp_path)
    fake_own_cluster(checkout, "1")
    assert run_stack(checkout, "up", port="1").returncode == 0
    stamp = (checkout / ".kiwi" / "pg" / "1" / "reset.sha256").read_text()
    (checkout / "supabase-args").unlink()
    other = run_stack(checkout, "up", port="2")  # the fake pg_isready: a server answers on 2
    assert other.returncode != 0 and "127.0.0.1:2" in other.stderr
    assert not (checkout / "supabase-args").exists()
    assert (checkout / ".kiwi" / "pg" / "1" / "reset.sha256").read_text() == stamp
    assert run_stack(checkout, "port", port="2").stdout.strip() == "2"


def test_a_port_that_is_not_a_number_is_refused(tmp_path: Path) -> None:
    checkout = fake_checkout(tmp_path)
    for bad in ("abc", "0", "65536", "5432; rm -rf /"):
        done = run_stack(checkout, "up", port=bad)
        assert done.returncode != 0 and "KIWI_DB_PORT must be a port number" in done.stderr, bad
    assert not (checkout / "supabase-args").exists()
