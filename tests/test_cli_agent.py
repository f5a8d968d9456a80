"""`kiwi agent`: `kiwi run` and `kiwi search` handed to a warm process, with the same output,
errors and exit codes as a cold `kiwi`, and the client's identity rules equal to Settings'."""

from __future__ import annotations

import re
import subprocess
import sys
from collections.abc import Callable, Iterator
from pathlib import Path

import pytest

from runner import Settings, anon, local_owner
from runner.cli import agent as agent_module
from runner.cli import warm_target as warm
from runner.config import DEFAULT_DB_PORT, STACK_RUNNER_LOGIN
from tests.agent_process import agent, cold, runtime_dir, steady
from tests.agent_process import warm as warm_kiwi
from tests.kiwi_cli import kiwi_env

TOKEN = "eyJhbGciOiJIUzI1NiJ9.eyJzdWIiOiJ4In0.c2lnbmF0dXJl"
CASES: list[dict[str, str]] = [
    {},
    {"KIWI_DB_PORT": "6001"},
    {"KIWI_DATABASE_URL": "postgresql://someone:secret@db.example:5432/kiwi"},
    {"KIWI_ADMIN": "1"},
    {"KIWI_ADMIN": "yes", "KIWI_ACCESS_TOKEN": TOKEN},
    {"KIWI_ADMIN": "0", "KIWI_ACCESS_TOKEN": TOKEN},
    {"KIWI_ACCESS_TOKEN": TOKEN, "KIWI_DB_PORT": "6002"},
    {"SUPABASE_URL": "https://p.supabase.co", "SUPABASE_ANON_KEY": "anon"},
    {"SUPABASE_URL": "https://p.supabase.co", "SUPABASE_KEY": "k", "KIWI_ACCESS_TOKEN": TOKEN},
    {"SUPABASE_URL": "https://p.supabase.co", "KIWI_DATABASE_URL": "postgresql://a@127.0.0.1:7/x"},
    {"KIWI_BACKEND": "rest", "SUPABASE_URL": "https://q.supabase.co", "SUPABASE_KEY": "k"},
    {"KIWI_BACKEND": "postgres", "SUPABASE_URL": "https://q.supabase.co"},
]
CONFIGS = [
    "",
    '[database]\nurl = "postgresql://cfg:pw@127.0.0.1:6100/postgres"\n',
    'backend = "rest"\n[supabase]\nurl = "https://c.supabase.co"\nkey = "anon"\n',
]


@pytest.mark.parametrize("config", CONFIGS)
@pytest.mark.parametrize("case", CASES)
def test_the_client_and_settings_name_the_same_identity_and_registry(
    case: dict[str, str], config: str, tmp_path: Path
) -> None:
    (tmp_path / "config.toml").write_text(config)
    env = {"HOME": str(tmp_path), "KIWI_CONFIG": str(tmp_path / "config.toml"), **case}
    settings = Settings.load(env)
    assert warm.target(env) == agent_module.settings_target(settings)
    stated = warm.target(env)
    assert stated is not None and "secret" not in stated["database"] and "pw@" not in stated["database"]
    if settings.admin:
        assert stated["identity"] == "service_role" and settings.principal().is_admin
    elif not settings.supabase_access_token:
        assert settings.principal() == (local_owner() if settings.backend == "postgres" else anon())
        assert stated["identity"] == ("local owner" if settings.backend == "postgres" else "anon")


def test_the_client_and_config_share_the_stack_defaults() -> None:
    assert (warm.DEFAULT_DB_PORT, warm.STACK_RUNNER_LOGIN) == (DEFAULT_DB_PORT, STACK_RUNNER_LOGIN)


def test_what_settings_refuse_or_a_stored_session_goes_cold(tmp_path: Path) -> None:
    home = {"HOME": str(tmp_path), "KIWI_CONFIG": str(tmp_path / "none.toml")}
    for bad in ({"KIWI_DB_PORT": "0x10"}, {"KIWI_ADMIN": "maybe"}, {"KIWI_BACKEND": "ftp"}, {"KIWI_BACKEND": "rest"}):
        assert warm.target({**home, **bad}) is None
    (tmp_path / ".config" / "kiwi").mkdir(parents=True)
    (tmp_path / ".config" / "kiwi" / "session.json").write_text("{}")
    assert warm.target(home) is None  # the cold path refreshes and uses it
    assert warm.target({**home, "KIWI_ACCESS_TOKEN": TOKEN}) is not None  # an explicit token wins, as in main


@pytest.fixture(scope="module")
def served(database_url: str, tmp_path_factory: pytest.TempPathFactory) -> Iterator[tuple[dict[str, str], Path]]:
    root = tmp_path_factory.mktemp("agent")
    cwd = root / "cwd"
    cwd.mkdir()
    env = kiwi_env(database_url, root / "cache", XDG_RUNTIME_DIR=str(runtime_dir(root)), HOME=str(root))
    with agent(env, cwd):
        yield env, cwd


@pytest.mark.slow
def test_warm_and_cold_say_the_same(
    served: tuple[dict[str, str], Path], publish_tool: Callable[..., str], tmp_path: Path
) -> None:
    env, cwd = served
    fails = publish_tool(
        "agent_fails",
        {"tool_type": "script", "executor": "bash_runtime"},
        {"fail.sh": "echo 'it broke' >&2\necho half-done\nexit 3\n"},
        entrypoint="fail.sh",
    )
    calls = [
        ["run", "hello_world", "-p", "name=Ada"],  # success
        ["run", "hello_world", "-p", "name=Ada", "--json"],
        [fails],  # the tool fails: exit 1
        [fails, "--json"],
        ["run", "no_such_tool_for_the_agent"],  # not found: exit 3
        ["run", "no_such_tool_for_the_agent", "--json"],
        ["run", "hello_world", "-p", "nme=Ada"],  # bad parameters: exit 2
        ["run", "hello_world", "--params", "{not json"],
        ["run"],  # argparse's usage error
        ["run", "--help"],
        ["search", "hello"],
        ["search", "greet", "--json"],
        ["--admin", "search", "hello"],  # another identity: the agent is not used (below)
    ]
    codes = set()
    for i, args in enumerate(calls):
        args = ["run", *args] if args[0] == fails else args
        expected = cold(args, cwd=cwd, env=env)
        done, heavy = warm_kiwi(args, cwd=cwd, env=env, note=tmp_path / f"note{i}")
        if args[0] == "--admin":
            assert done.code == 99, "an agent of the local owner served an admin call"
            continue
        assert done.code != 99, f"{args} was not handed to the agent"
        assert heavy == "", f"the warm client imported {heavy}"
        assert (done.code, steady(done.out), steady(done.err)) == (
            expected.code,
            steady(expected.out),
            steady(expected.err),
        ), args
        codes.add(done.code)
    assert {0, 1, 2, 3} <= codes


@pytest.mark.slow
def test_the_kiwi_command_itself_goes_warm(served: tuple[dict[str, str], Path]) -> None:
    """`python -m runner.cli` (like the console script: the same entry point) asks the agent first,
    and so never imports the driver; with KIWI_AGENT=off it does the work itself."""
    env, cwd = served
    for agent_setting, imports_driver in (("on", False), ("off", True)):
        done = subprocess.run(
            [sys.executable, "-X", "importtime", "-m", "runner.cli", "run", "hello_world", "-p", "name=Ada"],
            cwd=cwd,
            env={**env, "KIWI_AGENT": agent_setting},
            capture_output=True,
            text=True,
            timeout=120,
        )
        assert done.returncode == 0 and "Hello, Ada!" in done.stdout
        assert bool(re.search(r"\| +psycopg\n", done.stderr)) is imports_driver, agent_setting


WARMED = """
import sys
from runner.cli import agent
from runner.cli.main import main
agent._warm_up()
before = set(sys.modules)
codes = [main(["run", "hello_world", "-p", "name=Ada"]), main(["search", "hello"])]
late = sorted(m for m in set(sys.modules) - before if not m.startswith(("_", "encodings.")))
print("late:", " ".join(late), codes, file=sys.stderr)
"""


@pytest.mark.slow
def test_the_agent_has_imported_what_a_call_imports(database_url: str, tmp_path: Path) -> None:
    """A call forked from the agent imports nothing of its own: the agent warmed it all."""
    env = kiwi_env(database_url, tmp_path / "cache", HOME=str(tmp_path))
    done = subprocess.run(
        [sys.executable, "-c", WARMED], cwd=tmp_path, env=env, capture_output=True, text=True, timeout=120
    )
    assert "late:" in done.stderr, done.stderr
    assert done.stderr.split("late:", 1)[1].strip() == "[0, 0]", done.stderr
