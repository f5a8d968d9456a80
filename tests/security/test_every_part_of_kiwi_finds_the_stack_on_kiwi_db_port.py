"""KIWI_DB_PORT is the one setting for the local stack's port, and everything reads it.

Before, scripts/stack honoured KIWI_DB_PORT but the Makefile, the runner's default URL and
the tests' fixtures all named one fixed port: with the stack moved off a port another project's
PostgreSQL holds, `make demo`, `make test` and `kiwi` still acted on that other server.
"""

from __future__ import annotations

import os
import subprocess
import sys

import pytest

from runner import Settings, UsageError
from runner.config import DEFAULT_DB_PORT, stack_database_url, stack_port
from tests.conftest import ROOT, runner_url, stack_url

PORT = "6543"
PROBE = 'kiwi-port-probe: ; @echo "$$KIWI_DB_PORT"'  # what a target's commands see


def env_with(**extra: str) -> dict[str, str]:
    env = {k: v for k, v in os.environ.items() if k not in ("KIWI_DATABASE_URL", "KIWI_DB_PORT", "MAKEFLAGS")}
    return {**env, **extra}


def make(*args: str, env: dict[str, str]) -> str:
    done = subprocess.run(["make", "-s", *args], cwd=ROOT, env=env, capture_output=True, text=True, timeout=60)
    assert done.returncode == 0, done.stderr
    return done.stdout


def test_the_runners_default_url_follows_kiwi_db_port(tmp_path: os.PathLike[str]) -> None:
    settings = Settings.load({"HOME": str(tmp_path), "KIWI_DB_PORT": PORT}, None)
    assert settings.database_url == f"postgresql://kiwi_runner:kiwi_runner@127.0.0.1:{PORT}/postgres"
    unset = Settings.load({"HOME": str(tmp_path)}, None)
    assert unset.database_url == f"postgresql://kiwi_runner:kiwi_runner@127.0.0.1:{DEFAULT_DB_PORT}/postgres"
    explicit = Settings.load({"HOME": str(tmp_path), "KIWI_DB_PORT": PORT, "KIWI_DATABASE_URL": "postgresql://h/db"})
    assert explicit.database_url == "postgresql://h/db", "an explicit URL still wins"


@pytest.mark.parametrize("bad", ["x", "0", "65536", "54 322", "-1", "06543"])
def test_a_kiwi_db_port_that_is_no_port_is_named(bad: str) -> None:
    with pytest.raises(UsageError) as info:
        stack_port({"KIWI_DB_PORT": bad})
    assert "KIWI_DB_PORT" in info.value.message


@pytest.mark.slow
def test_kiwi_itself_connects_to_the_port_kiwi_db_port_names() -> None:
    """The CLI, with no KIWI_DATABASE_URL, tries the stack on KIWI_DB_PORT (nothing listens on 1)."""
    done = subprocess.run(
        [sys.executable, "-m", "runner.cli", "search", "anything"],
        cwd=ROOT,
        env=env_with(KIWI_DB_PORT="1"),
        capture_output=True,
        text=True,
        timeout=60,
    )
    assert done.returncode != 0
    assert "127.0.0.1:1/postgres" in done.stderr and "KIWI_DB_PORT" in done.stderr


def test_every_make_target_gets_the_port_from_the_environment_or_the_command_line() -> None:
    assert make("--eval", PROBE, "kiwi-port-probe", env=env_with(KIWI_DB_PORT=PORT)).strip() == PORT
    assert make(f"KIWI_DB_PORT={PORT}", "--eval", PROBE, "kiwi-port-probe", env=env_with()).strip() == PORT
    assert make("--eval", PROBE, "kiwi-port-probe", env=env_with()).strip() == str(DEFAULT_DB_PORT)
    # `make demo` hands the demo the runner's URL on that port (-n: print its commands, run none)
    demo = make("-n", "-o", ".venv/.synced", "-o", "node_modules/.installed", "demo", env=env_with(KIWI_DB_PORT=PORT))
    assert f"KIWI_DATABASE_URL=postgresql://kiwi_runner:kiwi_runner@127.0.0.1:{PORT}/postgres" in demo
    assert "scripts/stack up" in demo


def test_scripts_stack_and_the_tests_fixtures_follow_it(monkeypatch: pytest.MonkeyPatch) -> None:
    done = subprocess.run(
        [str(ROOT / "scripts" / "stack"), "url"], env=env_with(KIWI_DB_PORT=PORT), capture_output=True, text=True
    )
    assert done.stdout.strip() == f"postgresql://postgres:postgres@127.0.0.1:{PORT}/postgres"
    unset = subprocess.run([str(ROOT / "scripts" / "stack"), "port"], env=env_with(), capture_output=True, text=True)
    assert unset.stdout.strip() == str(DEFAULT_DB_PORT), "the shell's default and Python's are the same"
    monkeypatch.delenv("KIWI_DATABASE_URL", raising=False)
    monkeypatch.delenv("KIWI_RUNNER_DATABASE_URL", raising=False)
    monkeypatch.setenv("KIWI_DB_PORT", PORT)
    assert stack_url() == done.stdout.strip()
    assert runner_url(stack_url()) == stack_database_url()


def test_the_default_port_is_written_once_per_language() -> None:
    """Everything else derives the port from runner/stack_port.py's DEFAULT_DB_PORT or scripts/stack's
    DEFAULT_PORT (and the edge function's own constant), so moving it is a change in one place."""
    tracked = subprocess.run(["git", "ls-files"], cwd=ROOT, capture_output=True, text=True, check=True).stdout
    homes = {"runner/stack_port.py", "scripts/stack", "supabase/functions/registry/registry.ts"}
    code = (".py", ".sh", ".ts", ".toml", ".yml", ".yaml", "Makefile", "stack")
    found = []
    for name in tracked.splitlines():
        path = ROOT / name
        if name in homes or not name.endswith(code) or not path.is_file():
            continue
        if name == "supabase/config.toml":  # the Supabase CLI's own Docker stack, not Kiwi's
            continue
        if str(DEFAULT_DB_PORT) in path.read_text(errors="replace"):
            found.append(name)
    assert found == [], f"{DEFAULT_DB_PORT} is written out in {found}: derive it from KIWI_DB_PORT"
    for home in homes:
        assert (ROOT / home).read_text().count(str(DEFAULT_DB_PORT)) >= 1, home
