"""scripts/stack, the embedded stack's bring-up, on a fresh checkout of itself.

A real second PostgreSQL or a real reset would disturb the database the suite runs on,
so these tests give the script fakes (named as such) for what it would act on: a
`pg_isready` that says another server answers, a PostgreSQL bin folder, and a Supabase
CLI that records its arguments. The script's own logic is what runs for real.
"""

from __future__ import annotations

import os
import shutil
import subprocess
from pathlib import Path

from tests.conftest import ROOT

FAKE = "#!/usr/bin/env bash\n"


def fake_checkout(tmp_path: Path) -> Path:
    """A checkout holding just what `scripts/stack` reads, and fakes for what it runs."""
    checkout = tmp_path / "checkout"
    (checkout / "scripts").mkdir(parents=True)
    shutil.copy2(ROOT / "scripts" / "stack", checkout / "scripts" / "stack")
    shutil.copytree(ROOT / "supabase" / "migrations", checkout / "supabase" / "migrations")
    shutil.copy2(ROOT / "supabase" / "seed.sql", checkout / "supabase" / "seed.sql")
    shutil.copy2(ROOT / "supabase" / "local_owner.sql", checkout / "supabase" / "local_owner.sql")
    shutil.copy2(ROOT / "supabase" / "local_runner_login.sql", checkout / "supabase" / "local_runner_login.sql")
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


def run_stack(checkout: Path, *args: str) -> subprocess.CompletedProcess[str]:
    # psql is the real one, pointed at a port nobody listens on: "no schema yet", so a reset
    env = {**os.environ, "KIWI_PGBIN": str(checkout.parent / "pgbin"), "KIWI_DB_PORT": "1"}
    return subprocess.run(
        [str(checkout / "scripts" / "stack"), *args], env=env, capture_output=True, text=True, timeout=60
    )


def test_up_resets_a_postgres_that_already_answers_even_on_a_fresh_checkout(tmp_path: Path) -> None:
    """Regression: with another PostgreSQL on the port, the fresh checkout had no .kiwi/
    folder yet and the reset failed writing its log there."""
    checkout = fake_checkout(tmp_path)
    assert not (checkout / ".kiwi").exists()
    done = run_stack(checkout, "up")
    assert done.returncode == 0, done.stderr
    assert "already listens on 127.0.0.1:1; using it" in done.stderr
    args = (checkout / "supabase-args").read_text().split()
    assert args[:2] == ["db", "reset"] and "--yes" in args
    assert "--remote=postgresql://postgres:postgres@127.1:1/postgres?sslmode=disable" in args
    assert (checkout / ".kiwi" / "pg" / "reset.sha256").is_file(), "the reset is stamped"
    applied = (tmp_path / "pgbin" / "psql-args").read_text().split()
    assert str(checkout / "supabase" / "local_owner.sql") in applied, "the local owner is created after the reset"
    assert str(checkout / "supabase" / "local_runner_login.sql") in applied, "and the runner's login"


def test_the_runner_login_is_part_of_what_makes_the_stack_current(tmp_path: Path) -> None:
    """A change to the runner's login file resets the stack, as a migration does, and `runner-url`
    names that login on the stack's port."""
    checkout = fake_checkout(tmp_path)
    assert run_stack(checkout, "up").returncode == 0
    stamp = (checkout / ".kiwi" / "pg" / "reset.sha256").read_text()
    with (checkout / "supabase" / "local_runner_login.sql").open("a") as f:
        f.write("-- changed\n")
    assert run_stack(checkout, "up").returncode == 0
    assert (checkout / ".kiwi" / "pg" / "reset.sha256").read_text() != stamp
    url = run_stack(checkout, "runner-url").stdout.strip()
    assert url == "postgresql://kiwi_runner:kiwi_runner@127.0.0.1:1/postgres"
