"""What a fresh `kiwi` process loads (issue 18: a `kiwi run` that starts fast).

Structural, never timed (the time is bench/runner_bench.py's, d): `kiwi run` defines only its own
parser and imports only what running a tool uses; `kiwi --help` loads no driver and no runner;
every command is still defined, listed and reached the same way.
"""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path

from runner.cli.main import COMMANDS, build_parser, command_of
from tests.kiwi_cli import kiwi_env

# Never needed to run a script tool from the command line (each is another command's, or a handler's
# that hello_world does not use); the Python jsonschema package describes only refused parameters;
# a one-shot command holds one registry connection, no pool (registry.connect(..., one_shot=True)).
NOT_FOR_RUN = (
    "psycopg_pool",
    "mcp",
    "anyio",
    "httpx",
    "aiohttp",
    "pydantic",
    "supabase",
    "postgrest",
    "yaml",
    "jsonschema",
    "cryptography",
    "jwt",
    "wordllama",
    "numpy",
    "opentelemetry",  # telemetry is off unless OTEL_* asks for it (runner/telemetry)
    "prometheus_client",
    "runner.search",
    "runner.mcp_server",
    "runner.mcp_client",
    "runner.cli.search",
    "runner.cli.tools",
    "runner.cli.governance",
    "runner.cli.serve",
    "runner.cli.mcp",
    "runner.cli.token",
    "runner.cli.trust",
    "runner.cli.embed",
)


def _loaded(code: str, env: dict[str, str] | None = None) -> list[str]:
    """The modules a fresh interpreter has loaded after `code` (which prints nothing itself)."""
    probe = f"{code}\nimport json, sys\nprint(json.dumps(sorted(sys.modules)), file=sys.__stdout__)"
    done = subprocess.run([sys.executable, "-c", probe], capture_output=True, text=True, env=env, check=True)
    return json.loads(done.stdout.strip().splitlines()[-1])


def _named(modules: list[str], names: tuple[str, ...]) -> list[str]:
    return sorted(m for m in modules if any(m == n or m.startswith(n + ".") for n in names))


def test_every_command_is_named_in_the_table_and_defined_by_its_entry() -> None:
    """COMMANDS (what `kiwi CMD` builds alone) is complete: the full parser defines exactly its
    commands, in its order, and each entry alone defines its command."""
    listed = list(build_parser()._subparsers._group_actions[0].choices)  # type: ignore[union-attr]
    assert listed == list(COMMANDS)
    for name in COMMANDS:
        alone = build_parser(name)._subparsers._group_actions[0].choices  # type: ignore[union-attr]
        assert name in alone


def test_the_command_is_read_from_the_arguments_as_argparse_reads_it() -> None:
    assert command_of(["run", "hello_world"]) == "run"
    assert command_of(["--admin", "publish", "dir"]) == "publish"
    assert command_of(["run", "--help"]) == "run"
    assert command_of(["--help", "run"]) is None  # kiwi's own help lists every command
    assert command_of(["-h"]) is None
    assert command_of(["nonsense"]) is None  # the usage error lists every command
    assert command_of([]) is None


def test_parsing_kiwi_run_loads_no_runner_driver_or_event_loop() -> None:
    loaded = _loaded("import runner.cli.main as m; m.build_parser(m.command_of(['run', 'x'])).parse_args(['run', 'x'])")
    assert _named(loaded, ("psycopg", "psycopg_pool", "asyncio", "runner.harness", "runner.registry")) == []
    assert _named(loaded, NOT_FOR_RUN) == []


def test_kiwi_help_loads_no_driver_and_no_runner() -> None:
    loaded = _loaded("import runner.cli.main as m; m.build_parser()")
    assert _named(loaded, ("psycopg", "psycopg_pool", "runner.harness", "runner.handlers", "runner.registry")) == []
    assert _named(loaded, ("mcp", "httpx", "supabase", "yaml", "jsonschema", "cryptography", "runner.search")) == []


def test_a_real_kiwi_run_loads_nothing_another_command_uses(database_url: str, tmp_path: Path) -> None:
    """The whole run (parse, plan, gate, spawn, records) in one fresh interpreter, as `kiwi run` does."""
    env = kiwi_env(database_url, tmp_path / "cache")
    code = (
        "import contextlib, io, runner.cli.main as m\n"
        "with contextlib.redirect_stdout(io.StringIO()) as out:\n"
        "    code = m.main(['run', 'hello_world', '-p', 'name=Ada', '--json'])\n"
        "assert code == 0 and 'Hello, Ada!' in out.getvalue(), (code, out.getvalue())"
    )
    loaded = _loaded(code, env)
    assert "runner.harness.run" in loaded and "runner.cli.main" in loaded  # it did run
    assert "psycopg" in loaded  # over the Postgres backend, whose pool it does without
    assert _named(loaded, NOT_FOR_RUN) == []


def test_kiwi_show_and_search_load_no_pool_and_no_other_command(database_url: str, tmp_path: Path) -> None:
    """`kiwi show` and `kiwi search` (by words: KIWI_EMBEDDINGS=off) as they run, each in a fresh interpreter."""
    env = {**kiwi_env(database_url, tmp_path / "cache"), "KIWI_EMBEDDINGS": "off"}
    mine = ("runner.cli.tools", "runner.cli.search", "runner.search", "cryptography")  # both show signature states
    others = tuple(n for n in NOT_FOR_RUN if n not in mine)
    for argv, shown, own in (
        (["show", "hello_world", "--json"], "bash_runtime", "runner.cli.tools"),
        (["search", "hello", "--json"], "hello_world", "runner.cli.search"),
    ):
        code = (
            "import contextlib, io, runner.cli.main as m\n"
            "with contextlib.redirect_stdout(io.StringIO()) as out:\n"
            f"    code = m.main({argv!r})\n"
            f"assert code == 0 and {shown!r} in out.getvalue(), (code, out.getvalue())"
        )
        loaded = _loaded(code, env)
        assert own in loaded and "psycopg" in loaded  # it did run, over Postgres
        assert _named(loaded, others) == [], argv
