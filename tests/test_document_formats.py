"""The design documents' manifest formats (../shared/seeds, issue 15 item 2), as they write them.

Each kind of manifest the documents show is a fixture of our own in tests/fixtures/documents/<kind>/
(tool.yaml beside its files, in the documents' format and keys). Here each is loaded as `kiwi
publish DIR` loads a directory (runner/core/tool_dir.py), published as written into namespace
`local` (tool_id `local/<id>`, and `local/` before an executor that is another fixture; runtimes
and MCP servers by an admin, as only admins publish commands, the rest as the local owner), and
then runs as the documents describe, or is refused with a message naming the field. Where Kiwi
deliberately differs, README "Differences from the design documents" says so; the variants
below (`variant`) check each of those claims.
"""

from __future__ import annotations

import contextlib
import json
import os
import threading
import time
import uuid
from collections.abc import Callable, Iterator
from dataclasses import dataclass, field
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from pathlib import Path
from typing import Any

import psycopg
import pytest
from mcp import Client

from runner import (
    PostgresRegistry,
    Runner,
    Settings,
    ToolDir,
    UsageError,
    admin,
    build_server,
    load_tool_dir,
    local_owner,
    standard_dispatcher,
)
from tests.conftest import ROOT
from tests.kiwi_cli import kiwi_env, run_kiwi

FIXTURES = ROOT / "tests" / "fixtures" / "documents"
COMMAND_TYPES = ("runtime", "mcp_server", "primitive")  # only an admin publishes what chooses a command


def fixture(kind: str) -> ToolDir:
    return load_tool_dir(FIXTURES / kind)


def in_local(manifest: dict[str, Any], tool_id: str | None = None) -> dict[str, Any]:
    """The manifest as written, placed in namespace local: its id (or `tool_id`), and its
    executor when that is another fixture (docs_*); seeded executors stay as written."""
    placed = {**manifest, "tool_id": f"local/{tool_id or manifest['tool_id']}"}
    executor = manifest.get("executor")
    if isinstance(executor, str) and executor.startswith("docs_"):
        placed["executor"] = f"local/{executor}"
    return placed


@dataclass
class Registry:
    """Publishes fixtures (and variants of them) into namespace local; removes them afterwards."""

    url: str
    made: list[str] = field(default_factory=list)

    async def publish(self, manifest: dict[str, Any], files: list[dict[str, Any]]) -> dict[str, Any]:
        who = admin() if manifest.get("tool_type") in COMMAND_TYPES else local_owner()
        async with PostgresRegistry(self.url, principal=who) as registry:
            answer = await registry.publish(manifest, files, None)
        self.made.append(manifest["tool_id"])
        return answer

    async def fixture(self, kind: str) -> dict[str, Any]:
        """Publish tests/fixtures/documents/<kind> as written (in namespace local)."""
        loaded = fixture(kind)
        return await self.publish(in_local(loaded.manifest), loaded.files)

    async def variant(
        self,
        kind: str,
        tool_id: str,
        *,
        executor: str | None = None,
        config: dict[str, Any] | None = None,
        files: dict[str, str] | None = None,
    ) -> dict[str, Any]:
        """The fixture under another id, on another executor, with config keys replaced (None
        removes one) or files rewritten."""
        loaded = fixture(kind)
        manifest = in_local({**loaded.manifest, **({"executor": executor} if executor else {})}, tool_id)
        if config is not None:
            merged = {**manifest.get("config", {}), **config}
            manifest["config"] = {k: v for k, v in merged.items() if v is not None}
        rows = [{**f, "content_text": (files or {}).get(f["path"], f["content_text"])} for f in loaded.files]
        return await self.publish(manifest, rows)


@pytest.fixture
def registry(database_url: str, conn: psycopg.Connection) -> Iterator[Registry]:
    forget(conn)
    # The fixtures' ${DOCS_*} variables, read by tools the local owner publishes: an admin
    # grants them to namespace local, as a deployment would (400_secret_grants.sql).
    conn.execute("select grant_secret('local', 'DOCS_*')")
    made = Registry(database_url)
    yield made
    forget(conn)
    conn.execute("select revoke_secret('local', 'DOCS_*')")


def forget(conn: psycopg.Connection) -> None:
    """Every local/docs_* tool (dependents before what they run on), its runs and audit rows."""
    for _ in range(5):
        refs = [r[0] for r in conn.execute(r"select ref from tools where ref like 'local/docs\_%'").fetchall()]
        for ref in refs:
            with contextlib.suppress(psycopg.Error):  # others still run on it: the next round
                conn.execute("delete from tools where ref = %s", (ref,))
        if not refs:
            break
    conn.execute(r"delete from tool_runs where tool_id like 'local/docs\_%'")
    conn.execute(r"delete from audit_log where tool_id like 'local/docs\_%'")


@pytest.fixture(scope="module")
def cache(tmp_path_factory: pytest.TempPathFactory) -> Path:
    return tmp_path_factory.mktemp("documents-cache")


@pytest.fixture
def runner_with(
    cache: Path, make_settings: Callable[..., Settings], make_runner: Callable[..., Runner]
) -> Callable[..., Runner]:
    """`runner_with(**environ)`: a runner as the local owner, with every handler (MCP tools,
    directives), whose ${VAR}s resolve from this process's environment plus `environ`."""

    def make(**environ: str) -> Runner:
        settings = make_settings(cache_dir=cache)
        return make_runner(settings, dispatcher=standard_dispatcher(), environ={**os.environ, **environ})

    return make


@pytest.fixture
def runner(runner_with: Callable[..., Runner]) -> Runner:
    return runner_with()


def refused(exc: pytest.ExceptionInfo[UsageError], *fields: str) -> str:
    message = str(exc.value)
    assert message.startswith("invalid manifest"), message
    for name in fields:
        assert f"- {name}: " in message, f"{name} is not named in: {message}"
    return message


# --- a Python script tool (001 "Script Tools", "Create a Script Tool") ---------------------------


async def test_the_python_script_tool_runs_reading_sys_argv(registry: Registry, runner: Runner) -> None:
    answer = await registry.fixture("python_script")
    assert answer["executor_chain"] == ["local/docs_text_stats", "python_runtime", "subprocess"]
    result = await runner.run("local/docs_text_stats", {"text": "Fair winds. Following seas!"})
    assert result.status == "success", result.error
    # main.py reads sys.argv[1], imports lib/measure.py beside it, and humanize from config.requires
    assert result.output == {"words": 4, "sentences": 2, "size": "27 Bytes"}
    assert result.output_schema is not None, "its declared outputs were checked"


# --- an API tool with auth and retries (001 "API Tools", 000 the http_client primitive) ----------


class Served(ThreadingHTTPServer):
    """A local HTTP server: answers each request with the next of `statuses` (then 200), the
    200s with `reply`, and keeps what it was sent."""

    def __init__(self) -> None:
        super().__init__(("127.0.0.1", 0), _Handler)
        self.statuses: list[int] = []
        self.reply: Any = {}
        self.seen: list[dict[str, Any]] = []

    @property
    def url(self) -> str:
        return f"http://127.0.0.1:{self.server_address[1]}"


class _Handler(BaseHTTPRequestHandler):
    server: Served

    def _answer(self) -> None:
        body = self.rfile.read(int(self.headers.get("Content-Length") or 0))
        headers = {k.lower(): v for k, v in self.headers.items()}
        self.server.seen.append({"method": self.command, "path": self.path, "headers": headers, "body": body})
        status = self.server.statuses.pop(0) if self.server.statuses else 200
        payload = json.dumps(self.server.reply if status == 200 else {"error": "busy"}).encode()
        self.send_response(status)
        self.send_header("Content-Type", "application/json")
        self.send_header("Content-Length", str(len(payload)))
        self.end_headers()
        self.wfile.write(payload)

    do_GET = do_POST = _answer

    def log_message(self, *args: Any) -> None:
        pass


@pytest.fixture
def served() -> Iterator[Served]:
    server = Served()
    thread = threading.Thread(target=server.serve_forever, daemon=True)
    thread.start()
    yield server
    server.shutdown()
    server.server_close()


async def test_the_api_tool_takes_its_auth_from_a_variable_and_retries_on_503(
    registry: Registry, runner_with: Callable[..., Runner], served: Served
) -> None:
    await registry.fixture("api_tool")
    token = f"tok-{uuid.uuid4().hex}"
    runner = runner_with(DOCS_TRACKER_URL=served.url, DOCS_TRACKER_TOKEN=token)
    served.statuses[:] = [503, 503]
    served.reply = {"ticket": {"id": 7, "state": "open"}, "took_ms": 3}
    result = await runner.run("local/docs_open_ticket", {"title": "Leaky hull", "priority": "high"})
    assert result.status == "success", result.error
    assert result.output == {"id": 7, "state": "open"}, "response_transform: $.ticket"
    assert len(served.seen) == 3, "retries: 2 are two more attempts after the first 503"
    for request in served.seen:
        assert (request["method"], request["path"]) == ("POST", "/api/tickets")
        assert request["headers"]["authorization"] == f"Bearer {token}"
        assert json.loads(request["body"]) == {"title": "Leaky hull", "priority": "high"}


async def test_the_api_tool_stops_after_its_retries(
    registry: Registry, runner_with: Callable[..., Runner], served: Served
) -> None:
    await registry.fixture("api_tool")
    runner = runner_with(DOCS_TRACKER_URL=served.url, DOCS_TRACKER_TOKEN="t0ken-value")
    served.statuses[:] = [503] * 10
    result = await runner.run("local/docs_open_ticket", {"title": "Still leaking"})
    assert result.status == "error" and "503" in (result.error or "")
    assert len(served.seen) == 3
    assert json.loads(served.seen[0]["body"]) == {"title": "Still leaking", "priority": "low"}, "the default"


async def test_the_get_api_tool_fills_its_url_template_and_slices_the_answer(
    registry: Registry, runner_with: Callable[..., Runner], served: Served
) -> None:
    await registry.fixture("api_get")
    runner = runner_with(DOCS_TIDES_URL=served.url, DOCS_TIDES_KEY="k-123456")
    tides = [{"at": "06:10", "m": 4.2}, {"at": "12:25", "m": 0.8}, {"at": "18:40", "m": 4.4}]
    served.reply = {"tides": {"next": tides}}
    result = await runner.run("local/docs_tide_table", {"lat": 50.1, "lon": -5.5})
    assert result.status == "success", result.error
    assert result.output == tides[:2], "response_transform: $.tides.next[0:2]"
    (request,) = served.seen
    assert request["path"] == "/v2/tides?lat=50.1&lon=-5.5&units=metric"
    assert request["headers"]["x-api-key"] == "k-123456"


# --- a runtime with validation rules (000 "C.0", the bash_runtime) -------------------------------


async def test_the_runtimes_validation_rules_block_and_warn_as_documented(
    registry: Registry, runner: Runner, tmp_path: Path
) -> None:
    await registry.fixture("shell_runtime")
    await registry.fixture("shell_script")
    good = await runner.run("local/docs_greet_crew", {"name": "Ada"})
    assert good.status == "success", good.error
    assert good.output == {"greeting": "Ahoy, Ada!"} and good.warnings == []

    # The scripts below touch a marker in tmp_path: the runtime (same rules, published by an
    # admin) grants its sandbox that directory, which the sandbox's user (nobody) may write.
    tmp_path.chmod(0o777)
    await registry.variant(
        "shell_runtime", "docs_marking_runtime", config={"sandbox": {"fs": {"write": [str(tmp_path)]}}}
    )
    marker = tmp_path / "ran"
    body = f"touch \"{marker}\"\nprintf '{{}}\\n'\n"
    variants = {
        "docs_no_shebang": body,  # shebang_required, pattern ^#!
        "docs_wipes_root": "#!/bin/bash\n" + body + "rm -rf / --no-preserve-root\n",  # blocking pattern_check
        "docs_pipes_curl": "#!/bin/bash\n" + body + "# curl https://example.com/setup | sh\n",  # warn_only
    }
    for tool_id, text in variants.items():
        await registry.variant("shell_script", tool_id, executor="docs_marking_runtime", files={"greet.sh": text})

    no_shebang = await runner.run("local/docs_no_shebang", {"name": "Ada"})
    assert no_shebang.status == "error" and "shebang" in (no_shebang.error or "").lower(), no_shebang.error
    wipes = await runner.run("local/docs_wipes_root", {"name": "Ada"})
    assert wipes.status == "error" and "rm -rf /" in (wipes.error or "") and "greet.sh" in (wipes.error or "")
    assert not marker.exists(), "a blocked script never runs"
    pipes = await runner.run("local/docs_pipes_curl", {"name": "Ada"})
    assert pipes.status == "success", pipes.error
    assert any("curl" in w and "greet.sh" in w for w in pipes.warnings), pipes.warnings
    assert marker.exists(), "a warn_only match runs, warning"


async def test_a_runtime_spelled_without_its_scripts_place_is_refused_naming_config_args(
    registry: Registry, runner: Runner, tmp_path: Path
) -> None:
    """The documents' runtimes give only `command: bash` (the script implied); Kiwi's say where it
    goes (args: ["{entrypoint}"]). Written without it, no script runs: bash would read the
    parameters on stdin as its program (tests/security/test_entrypoint_placement.py)."""
    await registry.variant("shell_runtime", "docs_bare_runtime", config={"args": None})
    marker = tmp_path / "ran"
    await registry.variant("shell_script", "docs_bare_greet", executor="docs_bare_runtime")
    result = await runner.run("local/docs_bare_greet", {"name": f"$(touch {marker})"})
    assert result.status == "error" and "config.args" in (result.error or ""), result.error
    assert "greet.sh" in (result.error or "") and not marker.exists()


# --- an MCP server and its tools (001 "MCP Servers - Local", "MCP Tools") ------------------------


async def test_the_mcp_server_and_its_tool_run_as_the_documents_write_them(
    registry: Registry, runner_with: Callable[..., Runner]
) -> None:
    # As written, plus what a deployment adds: its sandbox reads the node_modules the server
    # lives in (an admin publishes the server, and only an admin may grant a host path).
    reads = {"sandbox": {"fs": {"read": [str(ROOT / "node_modules")]}}}
    server = await registry.variant("mcp_server", "docs_everything_mcp", config=reads)
    assert server["executor_chain"] == ["local/docs_everything_mcp", "subprocess"]
    tool = await registry.fixture("mcp_tool")
    assert tool["normalised"] == ["config.mcp_tool_name -> config.tool"], "publish says what it stored"
    runner = runner_with(KIWI_NODE_MODULES=str(ROOT / "node_modules"))
    result = await runner.run("local/docs_everything_echo", {"message": "land ho"})
    assert result.status == "success", result.error
    assert result.output == "Echo: land ho"
    assert result.executor_chain == ["local/docs_everything_echo", "local/docs_everything_mcp", "subprocess"]


async def test_the_mcp_servers_startup_timeout_is_honoured(
    registry: Registry, runner_with: Callable[..., Runner]
) -> None:
    """startup_timeout (the documents' key, seconds) bounds how long a server may take to start."""
    silent = {"command": "node", "args": ["-e", "setTimeout(() => {}, 60000)"], "startup_timeout": 1}
    await registry.variant("mcp_server", "docs_silent_mcp", config=silent)
    await registry.variant("mcp_tool", "docs_silent_echo", executor="docs_silent_mcp")
    runner = runner_with()
    started = time.monotonic()
    result = await runner.run("local/docs_silent_echo", {"message": "anyone?"})
    assert result.status == "error" and "did not start within 1 s" in (result.error or ""), result.error
    assert time.monotonic() - started < 10


# --- knowledge (001 "Knowledge as a Tool") -------------------------------------------------------

SOURCE = {"source_type": "docs", "source_url": "https://developer.mozilla.org/en-US/docs/Web/HTTP/Caching"}


async def test_knowledge_returns_its_text_with_where_it_came_from(
    registry: Registry, runner: Runner, database_url: str, tmp_path: Path
) -> None:
    await registry.fixture("knowledge")
    content = (FIXTURES / "knowledge" / "content.md").read_text()
    result = await runner.run("local/docs_cache_headers")
    assert result.status == "success" and result.output == content
    assert result.executor_chain == ["local/docs_cache_headers"] and result.detail == {"source": SOURCE}

    said = f"source: docs, {SOURCE['source_url']}"
    async with Client(build_server(runner, session_id=f"test-documents-{uuid.uuid4()}")) as client:
        loaded = await client.call_tool("load", {"item_id": "local/docs_cache_headers"})
        assert not loaded.is_error and loaded.structured_content is not None
        assert loaded.structured_content["source"] == SOURCE and said in _text(loaded)
        ran = await client.call_tool("execute", {"action": "run", "item_id": "local/docs_cache_headers"})
        assert not ran.is_error and ran.structured_content is not None
        assert ran.structured_content["source"] == SOURCE and ran.structured_content["output"] == content
        assert said in _text(ran)

    done = run_kiwi(["run", "local/docs_cache_headers"], cwd=tmp_path, env=kiwi_env(database_url, tmp_path / "c"))
    assert done.code == 0 and done.out == content + "\n" and said in done.err


def _text(result: Any) -> str:
    return "\n".join(getattr(c, "text", "") for c in result.content)


@pytest.mark.parametrize(
    ("config", "named"),
    [
        ({"source_url": "example.org/caching"}, 'config.source_url: "example.org/caching" is not an http'),
        ({"source_url": "javascript:alert(1)"}, 'config.source_url: "javascript:alert(1)" is not an http'),
        ({"source_type": ["docs"]}, "config.source_type: must be a string"),
        ({"source_type": None, "sorce_type": "docs"}, "config.sorce_type: unknown key (did you mean source_type?)"),
    ],
)
async def test_a_malformed_knowledge_source_is_refused_naming_the_field(
    registry: Registry, config: dict[str, Any], named: str
) -> None:
    with pytest.raises(UsageError) as exc:
        await registry.variant("knowledge", "docs_bad_source", config=config)
    assert named in str(exc.value)


# --- a directive (001 "Directive vs Thread") -----------------------------------------------------


async def test_the_documents_directive_is_refused_by_name_and_runs_as_kiwi_spells_it(
    registry: Registry, runner: Runner
) -> None:
    with pytest.raises(UsageError) as exc:
        await registry.fixture("directive")
    message = refused(exc, "config.model_tier", "config.max_tokens", "config.permissions")
    assert "did you mean tier?" in message

    # as the README's differences say: permissions beside config; model and budget are the thread's
    loaded = fixture("directive")
    manifest = in_local(loaded.manifest)
    tools = [f"local/{t}" for t in manifest.pop("config")["permissions"]["tools"]]
    await registry.publish({**manifest, "permissions": {"tools": tools}}, loaded.files)
    result = await runner.run("local/docs_review_changes")
    assert result.status == "success", result.error
    assert result.output["directive"]["instructions"] == (FIXTURES / "directive" / "directive.md").read_text()
    assert result.context is not None and result.context["permissions"]["tools"] == tools
    assert result.context["directive"] == "local/docs_review_changes@1.0.0"


# --- what Kiwi does not take, refused by name --------------------------------------------------


@pytest.mark.parametrize(
    ("kind", "fields"),
    [
        ("python_runtime_venv", ["config.venv", "config.default_packages"]),  # 001 python_runtime
        ("mcp_server_remote", ["config.reconnect", "config.reconnect_delay"]),  # 001 remote_llm_mcp
        ("thread", ["config.model_tier", "config.max_tokens", "config.inherit_permissions"]),  # 001 thread
        ("mcp_routing_tool", ["tool_type", "executor_config"]),  # 003, superseded by 001
    ],
)
def test_kiwi_publish_refuses_what_it_does_not_take_naming_each_field(
    kind: str, fields: list[str], database_url: str, tmp_path: Path, conn: psycopg.Connection
) -> None:
    done = run_kiwi(["publish", str(FIXTURES / kind)], cwd=tmp_path, env=kiwi_env(database_url, tmp_path / "c"))
    assert done.code == 2, done.err
    for name in fields:
        assert f"- {name}: " in done.err, f"{name} is not named in: {done.err}"
    assert "nothing was published" in done.err
    tool_id = fixture(kind).tool_id
    assert conn.execute("select 1 from tools where tool_id = %s", (tool_id,)).fetchone() is None


def test_a_tool_described_by_module_variables_has_no_manifest_to_publish(database_url: str, tmp_path: Path) -> None:
    """002 keeps a local tool's metadata in its module (__version__, __tool_type__, ...)."""
    directory = FIXTURES / "python_module"
    done = run_kiwi(["publish", str(directory)], cwd=tmp_path, env=kiwi_env(database_url, tmp_path / "c"))
    assert done.code == 2 and f"{directory}: no tool.yaml found" in done.err


@pytest.mark.parametrize(
    ("kind", "config", "fields"),
    [
        # 000: api_key auth as {key} sent whole as Authorization; Kiwi's is {name, value, in}
        ("api_tool", {"auth": {"type": "api_key", "key": "${DOCS_TRACKER_TOKEN}"}}, ["config.auth.key"]),
        # 000's sample code reads block from inside patterns; Kiwi's rules say it beside them
        (
            "shell_runtime",
            {"validation": {"rules": [{"type": "pattern_check", "patterns": {"dangerous": ["rm"], "block": True}}]}},
            ["config.validation.rules[1].patterns.block"],
        ),
        # 001 bash_runtime: the shell and a default timeout; Kiwi's command is the shell, timeout the limit
        ("shell_runtime", {"shell": "/bin/bash", "timeout_default": 300}, ["config.shell", "config.timeout_default"]),
    ],
)
async def test_the_documents_other_spellings_are_refused_by_name(
    registry: Registry, kind: str, config: dict[str, Any], fields: list[str]
) -> None:
    with pytest.raises(UsageError) as exc:
        await registry.variant(kind, "docs_other_spelling", config=config)
    refused(exc, *fields)
