"""The documentation teaches only what works: the site builds strictly (every internal link and
anchor resolves), each client's configuration has the shape that client documents and starts a
real `kiwi serve`, the README's quickstart runs as written against the test database, the
examples copied from the seed are the seed, and no page names an internal issue or a path
outside the repository."""

from __future__ import annotations

import json
import os
import re
import shutil
import subprocess
import sys
from pathlib import Path
from typing import Any
from urllib.parse import urlsplit

import psycopg
import pytest
from mcp import Client, StdioServerParameters

from runner.config import DEFAULT_DB_PORT, STACK_RUNNER_LOGIN
from tests.conftest import OWN_DATABASE, ROOT, runner_url
from tests.kiwi_cli import kiwi_env
from tests.tcp_forward import forwarding

DOCS = ROOT / "docs"
README = ROOT / "README.md"
PAGES = sorted(DOCS.rglob("*.md"))
PLACEHOLDER = "/path/to/kiwi"  # what the client guides write for the clone's path
# what they write for the database: the stack's default port, so a guide follows the default
LOCAL_URL = f"postgresql://kiwi_runner:kiwi_runner@127.0.0.1:{DEFAULT_DB_PORT}/postgres"
INSPECTOR = ROOT / "node_modules" / ".bin" / "mcp-inspector"
# what each client documents: its top-level key, the transports an entry may name, and the
# variable syntax it expands in a value (anything else written as ${...} reaches it verbatim)
CLIENTS: dict[str, dict[str, Any]] = {
    "claude-desktop": {"top": "mcpServers", "types": None, "variables": None},
    "claude-code": {
        "top": "mcpServers",
        "types": {"stdio", "http", "sse"},
        "variables": r"\$\{[A-Z_][A-Z0-9_]*(:-[^}]*)?\}",
    },
    "cursor": {"top": "mcpServers", "types": None, "variables": r"\$\{env:[A-Za-z_][A-Za-z0-9_]*\}"},
    "vscode": {
        "top": "servers",
        "types": {"stdio", "http", "sse"},
        "variables": r"\$\{(input:[\w.-]+|env:\w+|workspaceFolder)\}",
    },
}


def blocks(path: Path, marker: str) -> list[tuple[str, str]]:
    """(the marker's value, the fenced block right after it) for each `<!-- marker: value -->` or
    bare `<!-- marker -->` in the file."""
    pattern = re.compile(r"<!-- " + re.escape(marker) + r"(?::\s*(\S+))? -->\n```[\w-]*\n(.*?)\n```", re.S)
    return [(m.group(1) or "", m.group(2)) for m in pattern.finditer(path.read_text())]


def client_configs() -> list[tuple[str, str, Any]]:
    found = []
    for page in PAGES:
        for kind, text in blocks(page, "client-config"):
            found.append((f"{page.relative_to(ROOT)}:{kind}", kind, json.loads(text)))
    return found


@pytest.mark.slow
def test_the_site_builds_strictly(tmp_path: Path) -> None:
    """mkdocs.yml says strict: a broken link or anchor, or a page missing from nav, fails."""
    done = subprocess.run(
        [sys.executable, "-m", "mkdocs", "build", "--strict", "-d", str(tmp_path / "site")],
        cwd=ROOT,
        capture_output=True,
        text=True,
        timeout=300,
    )
    assert done.returncode == 0, done.stderr
    assert (tmp_path / "site" / "clients" / "claude-desktop" / "index.html").exists()


def test_the_manifest_keys_page_lists_every_tool_type_and_the_keys_it_adds(conn: psycopg.Connection) -> None:
    """The page is generated from the schema files; what it says is what the database holds: every
    tool type with its executors, and each key a type's own contract declares, under the type."""
    page = (DOCS / "reference" / "manifest-keys.md").read_text()
    types = page.split("\n## Tool types\n", 1)[1]
    rows = conn.execute(
        "select tool_type, requires_executor, executor_types, terminal_primitive, config_schema from tool_type_rules"
    ).fetchall()
    assert rows
    for tool_type, requires, executors, terminal, schema in rows:
        row = next(line for line in types.splitlines() if line.startswith(f"| `{tool_type}` |"))
        assert all(f"`{t}`" in row for t in executors) and (requires or "| none |" in row), row
        assert terminal is None or f"`{terminal}`" in row, row
        if schema:
            section = types.split(f"\n### {tool_type}\n", 1)[1].split("\n### ", 1)[0]
            for key in schema.get("properties", {}):
                assert f"| `config.{key}` |" in section, (tool_type, key)
        else:
            assert f"\n### {tool_type}\n" not in types


def test_the_readme_links_only_to_files_of_the_repository_and_stays_short() -> None:
    text = README.read_text()
    assert len(text.encode()) < 15 * 1024
    targets = re.findall(r"\]\(([^)#\s]+)(?:#[^)]*)?\)", text)
    assert targets, "the README links into docs/"
    for target in targets:
        assert not re.match(r"\w+:", target), f"{target}: the README links only inside the repository"
        assert (ROOT / target).exists(), f"README.md links to {target}, which does not exist"


def test_the_readme_says_where_the_sql_lives_who_sees_a_new_tool_and_how_to_pick_a_port() -> None:
    """What a newcomer met that the README had wrong or left out."""
    text = " ".join(README.read_text().split())
    assert "declared once in `supabase/schemas/`" in text, "the SQL is declared there, not in the migration"
    assert "is private (only the namespace's members see it) unless its `tool.yaml` says `visibility: public`" in text
    port = re.search(r"`KIWI_DB_PORT=(\d+) make demo`", text)
    assert port and int(port.group(1)) != DEFAULT_DB_PORT


@pytest.mark.parametrize("path", [README, *PAGES], ids=lambda p: str(p.relative_to(ROOT)))
def test_no_page_names_an_internal_issue_or_a_path_outside_the_repository(path: Path) -> None:
    text = path.read_text()
    assert not re.search(r"\bissues? #?\d+", text, re.I), re.search(r".*\bissues? #?\d+.*", text, re.I)
    assert "../shared" not in text


def test_every_example_marked_as_a_seed_file_is_that_file() -> None:
    examples = blocks(DOCS / "writing-tools.md", "example")
    assert len(examples) >= 9
    for path, text in examples:
        assert text == (ROOT / path).read_text().rstrip(), f"docs/writing-tools.md's copy of {path} differs"


@pytest.mark.slow
def test_the_reference_pages_are_current() -> None:
    done = subprocess.run(
        [sys.executable, "scripts/build_docs_reference.py", "--check"], cwd=ROOT, capture_output=True, text=True
    )
    assert done.returncode == 0, done.stderr


def test_every_client_has_configurations_in_its_documented_shape() -> None:
    configs = client_configs()
    assert {kind for _, kind, _ in configs} == set(CLIENTS)
    for where, kind, config in configs:
        rules = CLIENTS[kind]
        assert rules["top"] in config, f"{where}: {kind} reads servers from {rules['top']!r}"
        assert set(config) <= {rules["top"], "inputs"}, f"{where}: unknown top-level keys {set(config)}"
        declared = {i["id"] for i in config.get("inputs", [])}
        for name, server in config[rules["top"]].items():
            assert re.fullmatch(r"[a-zA-Z][\w-]*", name)
            if rules["types"] is not None:
                assert server.get("type") in rules["types"], f"{where}: {name} needs a type its client knows"
            assert ("command" in server) != ("url" in server), f"{where}: {name} is either spawned or reached"
            text = json.dumps(server)
            for variable in re.findall(r"\$\{[^}]*\}", text):
                assert rules["variables"] and re.fullmatch(rules["variables"], variable), (
                    f"{where}: {kind} does not expand {variable}"
                )
                if variable.startswith("${input:"):
                    assert variable[8:-1] in declared, f"{where}: {variable} is not among the inputs"
            if "command" in server:
                assert isinstance(server.get("args", []), list)
                command = Path(server["command"].replace(PLACEHOLDER, str(ROOT)))
                assert command.is_file() and os.access(command, os.X_OK), f"{where}: {command} does not exist"
                env = server.get("env", {})
                assert env.get("KIWI_DATABASE_URL"), f"{where}: kiwi serve needs KIWI_DATABASE_URL"
                modules = Path(env.get("KIWI_NODE_MODULES", "").replace(PLACEHOLDER, str(ROOT)))
                assert (modules / "@modelcontextprotocol").is_dir(), f"{where}: KIWI_NODE_MODULES is not node_modules"
            else:
                assert server["url"].endswith("/mcp")
                assert server["headers"]["Authorization"].startswith("Bearer ")


async def test_each_stdio_entry_starts_kiwi_serve_as_written(database_url: str, tmp_path: Path) -> None:
    """The clients spawn command + args with env and little else: that alone must serve."""
    entries = {
        json.dumps(server, sort_keys=True): server
        for _, kind, config in client_configs()
        for server in config[CLIENTS[kind]["top"]].values()
        if "command" in server
    }
    assert entries
    for server in entries.values():
        env = {k: v.replace(PLACEHOLDER, str(ROOT)) for k, v in server["env"].items()}
        assert env.pop("KIWI_DATABASE_URL") == LOCAL_URL
        env.update(KIWI_DATABASE_URL=runner_url(database_url), KIWI_CACHE_DIR=str(tmp_path / "cache"))
        params = StdioServerParameters(
            command=server["command"].replace(PLACEHOLDER, str(ROOT)), args=server["args"], env=env, cwd=str(tmp_path)
        )
        async with Client(params) as client:
            assert {t.name for t in (await client.list_tools()).tools} == {"search", "load", "execute", "help"}
            ran = await client.call_tool("execute", {"action": "run", "item_id": "hello_world"})
            assert ran.structured_content["output"] == {"greeting": "Hello, world!"}


def test_the_python_sdk_examples_run_as_written(database_url: str, tmp_path: Path) -> None:
    examples = dict(blocks(DOCS / "clients" / "python-sdk.md", "client-example"))
    assert set(examples) == {"python-stdio", "python-http"}
    compile(examples["python-http"], "python-http", "exec")
    script = tmp_path / "example.py"
    script.write_text(
        examples["python-stdio"].replace(PLACEHOLDER, str(ROOT)).replace(LOCAL_URL, runner_url(database_url))
    )
    env = {k: v for k, v in os.environ.items() if not k.startswith(("KIWI_", "SUPABASE_"))}
    done = subprocess.run(
        [sys.executable, str(script)], cwd=tmp_path, env=env, capture_output=True, text=True, timeout=120
    )
    assert done.returncode == 0, done.stderr
    assert done.stdout.splitlines() == [
        "['search', 'load', 'execute', 'help']",
        "hello_world",
        "{'greeting': 'Hello, Ada!'}",
    ]


def quickstart() -> list[str]:
    readme = [text for _, text in blocks(README, "quickstart")]
    guide = [text for _, text in blocks(DOCS / "getting-started.md", "quickstart")]
    assert len(readme) == 4 and readme == guide, "the README's quickstart and the guide's are the same commands"
    return readme


def shown_output(block: str) -> list[str]:
    """What a quickstart block says its commands print: its closing `# ` comment lines."""
    lines = block.splitlines()
    shown: list[str] = []
    while lines and lines[-1].startswith("# "):
        shown.insert(0, lines.pop()[2:])
    return shown


def assert_shows(shown: list[str], printed: str) -> None:
    """Each line shown is printed, in that order: `...` stands for lines left out, and a line
    ending in ` ...` for the rest of its line."""
    lines, at = printed.splitlines(), 0
    for want in shown:
        if want == "...":
            continue
        head = want.removesuffix(" ...")
        found = next((i for i in range(at, len(lines)) if lines[i] == want or lines[i].startswith(head + " ")), None)
        assert found is not None, f"the quickstart shows {want!r}; printed:\n{printed}"
        at = found + 1


def forget_uppercase(database_url: str) -> None:
    """The quickstart's tool out of the suite's own database (the only one it runs in)."""
    with psycopg.connect(database_url, autocommit=True) as conn:
        conn.execute("select set_config('request.jwt.claims', '{\"role\": \"service_role\"}', false)")
        found = conn.execute(
            "select 1 from public.tools where namespace = 'local' and tool_id = 'uppercase'"
        ).fetchone()
        if found:
            conn.execute("select public.delete_tool('local/uppercase')")


def stack_address(database_url: str, config: pytest.Config) -> tuple[str, int, str]:
    """Where the suite's own database listens on the local stack, and its name: the quickstart
    publishes `local/uppercase`, so it runs only there (tests/conftest.py OWN_DATABASE), never in
    a database someone else's tools may live in."""
    url = urlsplit(runner_url(database_url))
    if not config.stash[OWN_DATABASE] or f"{url.username}:{url.password}" != STACK_RUNNER_LOGIN or not url.port:
        pytest.skip("the quickstart runs in the suite's own database on the local stack only")
    return url.hostname or "127.0.0.1", url.port, url.path.lstrip("/")


@pytest.mark.skipif(not INSPECTOR.exists() or shutil.which("node") is None, reason="npm dependencies missing")
def test_the_quickstart_runs_as_written(database_url: str, tmp_path: Path, pytestconfig: pytest.Config) -> None:
    """As a user whose stack is not on the default port runs it: KIWI_DB_PORT set, nothing else.
    The stack is reached through a port of the test's own, never DEFAULT_DB_PORT, whichever
    port the suite's stack is on; and `kiwi serve`, started by the Inspector (which hands its
    server only a few of its own variables), must come through that port too. Before, the
    quickstart's Inspector step passed the port on to nobody: its server talked to the default
    port, another stack or none. The port leads to the suite's own database (KIWI_DB_PORT alone
    names the default one, where the user's own `local/uppercase` may be)."""
    *local, over_mcp = quickstart()
    host, port, database = stack_address(database_url, pytestconfig)
    forget_uppercase(database_url)
    try:
        with forwarding((host, port), avoid=(DEFAULT_DB_PORT,), database=database) as stack:
            env = kiwi_env(database_url, tmp_path / "cache")
            del env["KIWI_DATABASE_URL"]
            env["KIWI_DB_PORT"] = str(stack.port)
            env["PATH"] = f"{ROOT / '.venv' / 'bin'}:{ROOT / 'node_modules' / '.bin'}:{env['PATH']}"
            work = tmp_path / "work"
            work.mkdir()

            def run(script: str) -> subprocess.CompletedProcess[str]:
                done = subprocess.run(
                    ["bash", "-euo", "pipefail", "-c", script],
                    cwd=work,
                    env=env,
                    capture_output=True,
                    text=True,
                    timeout=300,
                )
                assert done.returncode == 0, f"{done.stdout}\n{done.stderr}"
                return done

            done = run("\n".join(local))
            assert "published: local/uppercase@1.0.0" in done.stdout
            assert_shows([line for block in local for line in shown_output(block)], done.stdout)
            before = stack.accepted
            done = run(over_mcp)
            assert '"HI FROM MCP"' in done.stdout and '"isError": false' in done.stdout
            assert_shows(shown_output(over_mcp), done.stdout)
            assert stack.accepted > before, "the Inspector's kiwi serve reached the stack on KIWI_DB_PORT"
    finally:
        forget_uppercase(database_url)
