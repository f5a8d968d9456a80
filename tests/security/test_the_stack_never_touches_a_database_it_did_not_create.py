"""`make demo` with another project's PostgreSQL on the port refuses and leaves it untouched.

Before, scripts/stack found any PostgreSQL answering on its port (the Supabase CLI's own db
port, so every developer running `supabase start` for another project), said "using it"
and ran `supabase db reset` against it. Here a real "foreign" PostgreSQL, started with the
stack's own binaries in a folder of this test's, holds a table with a row; `make demo`
and `scripts/stack reset` pointed at it through KIWI_DB_PORT must refuse with a message
saying how to pick another port, and the foreign database must keep its row and gain no
Kiwi schema and no Kiwi roles.
"""

from __future__ import annotations

import os
import shutil
import socket
import subprocess
import tempfile
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path

import psycopg
import pytest

from tests.conftest import ROOT

pytestmark = pytest.mark.slow  # a foreign PostgreSQL cluster, and scripts/stack

STACK = ROOT / "scripts" / "stack"
KIWI_ROLES = ("kiwi_runner", "anon", "authenticated", "service_role", "supabase_admin")


def as_postgres(argv: list[str]) -> list[str]:
    """PostgreSQL refuses to run as root: as root, run its tools as the `postgres` user."""
    return ["runuser", "-u", "postgres", "--", *argv] if os.geteuid() == 0 else argv


def free_port() -> int:
    with socket.socket() as probe:
        probe.bind(("127.0.0.1", 0))
        return int(probe.getsockname()[1])


@dataclass
class Foreign:
    port: int
    url: str


@pytest.fixture
def foreign() -> Iterator[Foreign]:
    """Another project's PostgreSQL: initdb'd and started by this test, stopped afterwards."""
    pgbin = Path(subprocess.run([str(STACK), "pgbin"], capture_output=True, text=True, check=True).stdout.strip())
    folder = Path(tempfile.mkdtemp(prefix="kiwi-foreign-pg-"))
    folder.chmod(0o755)
    data, sock = folder / "data", folder / "run"
    sock.mkdir()
    if os.geteuid() == 0:
        shutil.chown(folder, "postgres", "postgres")
        shutil.chown(sock, "postgres", "postgres")
    port = free_port()
    subprocess.run(
        as_postgres([str(pgbin / "initdb"), "-D", str(data), "-U", "postgres", "--auth=trust", "-E", "UTF8"]),
        capture_output=True,
        check=True,
    )
    options = f"-p {port} -k {sock} -c listen_addresses=127.0.0.1"
    start = as_postgres([str(pgbin / "pg_ctl"), "-D", str(data), "-o", options, "-l", str(folder / "log"), "-w"])
    subprocess.run([*start, "start"], capture_output=True, check=True)
    url = f"postgresql://postgres@127.0.0.1:{port}/postgres"
    try:
        with psycopg.connect(url, autocommit=True) as conn:
            conn.execute("create table their_orders (id int primary key, item text)")
            conn.execute("insert into their_orders values (1, 'not yours')")
        yield Foreign(port, url)
    finally:
        subprocess.run(
            as_postgres([str(pgbin / "pg_ctl"), "-D", str(data), "-m", "immediate", "stop"]), capture_output=True
        )
        shutil.rmtree(folder, ignore_errors=True)


def assert_untouched(foreign: Foreign) -> None:
    with psycopg.connect(foreign.url, autocommit=True) as conn:
        assert conn.execute("select id, item from their_orders").fetchall() == [(1, "not yours")]
        assert conn.execute("select to_regclass('public.tools')").fetchone() == (None,), "no Kiwi schema"
        schemas = {row[0] for row in conn.execute("select nspname from pg_namespace")}
        assert not schemas & {"auth", "storage", "extensions", "supabase_migrations"}, schemas
        roles = {row[0] for row in conn.execute("select rolname from pg_roles")}
        assert not roles & set(KIWI_ROLES), roles


def run(argv: list[str], port: int) -> subprocess.CompletedProcess[str]:
    env = {**os.environ, "KIWI_DB_PORT": str(port)}
    env.pop("KIWI_DATABASE_URL", None)
    return subprocess.run(argv, cwd=ROOT, env=env, capture_output=True, text=True, timeout=300)


def test_make_demo_refuses_a_foreign_postgres_and_leaves_it_untouched(foreign: Foreign) -> None:
    # -o: take the dependency stamps as made, so the test installs nothing into the shared tree
    done = run(["make", "-o", ".venv/.synced", "-o", "node_modules/.installed", "demo"], foreign.port)
    assert done.returncode != 0
    said = done.stderr
    assert f"did not start already answers on 127.0.0.1:{foreign.port}" in said, said
    assert "no reset, no roles, no writes" in said and "export KIWI_DB_PORT=<free port>" in said
    assert "using it" not in said and "supabase db reset" not in said
    assert "== " not in done.stdout, "the demo did not run"
    assert_untouched(foreign)
    assert not (ROOT / ".kiwi" / "pg" / str(foreign.port)).exists(), "no cluster, log or stamp for that port"


def test_reset_and_stop_leave_a_foreign_postgres_alone(foreign: Foreign) -> None:
    reset = run([str(STACK), "reset"], foreign.port)
    assert reset.returncode != 0 and "did not start" in reset.stderr
    stop = run([str(STACK), "stop"], foreign.port)
    assert stop.returncode == 0 and "not running" in stop.stderr
    status = run([str(STACK), "status"], foreign.port)
    assert "did not start" in status.stderr and "KIWI_DB_PORT" in status.stderr
    assert_untouched(foreign)  # and still up: it answers
