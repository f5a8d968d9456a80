"""The runner end to end: real database, real plans, real processes, a real local HTTP server."""

from __future__ import annotations

import asyncio
import json
import os
import threading
from collections.abc import AsyncIterator, Callable, Iterator
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from pathlib import Path
from typing import Any, ClassVar

import psycopg
import pytest

from runner import (
    IntegrityError,
    InvalidParameters,
    NotFound,
    PostgresRegistry,
    PrimitiveError,
    Refused,
    Runner,
    RunResult,
    local_owner,
)
from runner.core.records import params_digest
from tests.conftest import local_settings

SESSION_CACHE: dict[str, Path] = {}


@pytest.fixture(scope="session")
def shared_cache(tmp_path_factory: pytest.TempPathFactory) -> Path:
    """One cache for tests that do not study caching, so the Python environment is built once."""
    return tmp_path_factory.mktemp("kiwi-cache")


@pytest.fixture
async def runner(database_url: str, shared_cache: Path) -> AsyncIterator[Runner]:
    r = Runner(PostgresRegistry(database_url, principal=local_owner()), local_settings(database_url, shared_cache))
    yield r
    await r.aclose()


async def record_of(runner: Runner, conn: psycopg.Connection, result: RunResult) -> dict[str, Any]:
    """The run's record, once the runner has written it (records are written behind the runs)."""
    assert result.run_id, f"the run left no record: {result.warnings}"
    await runner.flush_records()
    cur = conn.execute("select * from tool_runs where id = %s", (result.run_id,))
    names = [d.name for d in cur.description or []]
    row = cur.fetchone()
    assert row is not None
    return dict(zip(names, row, strict=True))


# --- the seeded tools ------------------------------------------------------------------


async def test_the_seeded_bash_tool_reads_its_parameter_from_the_environment(runner: Runner) -> None:
    result = await runner.run("hello_world", {"name": "Ada"})
    assert result.status == "success", result.error
    assert result.output == {"greeting": "Hello, Ada!"}
    assert result.executor_chain == ["hello_world", "bash_runtime", "subprocess"]
    assert result.exit_code == 0 and result.version == "1.0.0"


async def test_the_seeded_bash_tool_uses_its_schema_default(runner: Runner) -> None:
    result = await runner.run("hello_world")
    assert result.output == {"greeting": "Hello, world!"}


async def test_the_seeded_python_tool_runs_with_its_dependency(runner: Runner) -> None:
    result = await runner.run("format_bytes", {"bytes": 123456789, "binary": True})
    assert result.status == "success", result.error
    assert result.output == {"bytes": 123456789, "human": "117.7 MiB"}
    assert result.executor_chain == ["format_bytes", "python_runtime", "subprocess"]


async def test_the_seeded_node_tool_reads_its_parameters_from_stdin(runner: Runner) -> None:
    result = await runner.run("word_count", {"text": "to be or not\nto be"})
    assert result.status == "success", result.error
    assert result.output == {"words": 6, "lines": 2, "characters": 18}


async def test_a_knowledge_entry_returns_its_content(runner: Runner) -> None:
    result = await runner.run("kiwi_tool_authoring")
    assert result.status == "success"
    assert isinstance(result.output, str) and result.output.startswith("# Writing a Kiwi tool")
    assert result.executor_chain == ["kiwi_tool_authoring"]


class Echo(BaseHTTPRequestHandler):
    """A local stand-in for httpbin's /anything; fails the first `fail_first` requests with 503."""

    fail_first = 0
    seen: ClassVar[list[dict[str, Any]]] = []

    def do_POST(self) -> None:
        body = self.rfile.read(int(self.headers.get("Content-Length") or 0))
        Echo.seen.append({"path": self.path, "headers": dict(self.headers.items()), "body": body})
        if len(Echo.seen) <= Echo.fail_first:
            self.send_response(503)
            self.send_header("Content-Length", "0")
            self.end_headers()
            return
        answer = json.dumps({"json": json.loads(body or b"null"), "auth": self.headers.get("Authorization")}).encode()
        self.send_response(200)
        self.send_header("Content-Type", "application/json")
        self.send_header("Content-Length", str(len(answer)))
        self.end_headers()
        self.wfile.write(answer)

    def log_message(self, *args: object) -> None:
        pass


@pytest.fixture
def echo_server() -> Iterator[Callable[[int], str]]:
    server = ThreadingHTTPServer(("127.0.0.1", 0), Echo)
    threading.Thread(target=server.serve_forever, daemon=True).start()

    def url(fail_first: int = 0) -> str:
        Echo.fail_first, Echo.seen = fail_first, []
        return f"http://127.0.0.1:{server.server_port}/anything"

    yield url
    server.shutdown()


async def test_the_seeded_api_tool_posts_to_a_local_server(
    database_url: str, shared_cache: Path, echo_server: Callable[[int], str]
) -> None:
    runner = Runner(
        PostgresRegistry(database_url, principal=local_owner()),
        local_settings(database_url, shared_cache),
        environ={**os.environ, "HTTP_ECHO_URL": echo_server(0)},
    )
    try:
        result = await runner.run("http_echo", {"message": "hi"})
    finally:
        await runner.aclose()
    assert result.status == "success", result.error
    assert result.output == {"message": "hi"}, "response_transform $.json picked the echoed body"
    assert result.executor_chain == ["http_echo", "http_client"]
    assert "Authorization" not in Echo.seen[0]["headers"], "an empty token sends no auth header"


async def test_the_api_tool_is_retried_past_a_503_to_its_200(
    database_url: str, shared_cache: Path, echo_server: Callable[[int], str]
) -> None:
    runner = Runner(
        PostgresRegistry(database_url, principal=local_owner()),
        local_settings(database_url, shared_cache),
        environ={**os.environ, "HTTP_ECHO_URL": echo_server(2)},
    )
    try:
        result = await runner.run("http_echo", {"message": "again"})
    finally:
        await runner.aclose()
    assert result.status == "success", result.error
    assert len(Echo.seen) == 3, "two 503s, then the 200"
    assert result.output == {"message": "again"}


# --- the design documents' keys (issue 15), published as the documents write them ------------


async def test_config_timeout_in_seconds_ends_a_script(runner: Runner, publish_tool: Callable[..., str]) -> None:
    """Regression: `config: {timeout: 1}` was ignored (only timeout_s was read); a script that
    sleeps 4 s returned success after 4,021 ms."""
    tool = publish_tool(
        "sleepy",
        {"tool_type": "script", "executor": "bash_runtime", "config": {"timeout": 1}},
        {"run.sh": "#!/bin/bash\nsleep 4\necho done\n"},
        entrypoint="run.sh",
    )
    result = await runner.run(tool)
    assert result.status == "timeout", result
    assert result.error.startswith("timed out after 1 s")
    assert result.duration_ms < 3000


async def test_retries_0_sends_an_api_request_once(
    database_url: str, shared_cache: Path, echo_server: Callable[[int], str], publish_tool: Callable[..., str]
) -> None:
    """Regression: with `retries: 0` a 503 was still tried three times ("attempt 2 of 3")."""
    url = echo_server(5)
    api = publish_tool(
        "once",
        {
            "tool_type": "api",
            "executor": "http_client",
            "config": {"method": "POST", "url": url, "timeout": 5, "retries": 0, "retry_delay": 0.01},
        },
    )
    twice = publish_tool(
        "twice",
        {
            "tool_type": "api",
            "executor": "http_client",
            "config": {"method": "POST", "url": url, "retries": 1, "retry_delay": 0.01, "retryable_statuses": [503]},
        },
    )
    lines: list[str] = []
    runner = Runner(
        PostgresRegistry(database_url, principal=local_owner()),
        local_settings(database_url, shared_cache),
        on_progress=lines.append,
    )
    try:
        once = await runner.run(api)
        assert (once.status, once.detail["attempts"], len(Echo.seen), lines) == ("error", 1, 1, [])
        again = await runner.run(twice)
    finally:
        await runner.aclose()
    assert again.detail["attempts"] == 2 and len(Echo.seen) == 3
    assert lines == ["HTTP 503, retrying in 0.0 s (attempt 2 of 2)"]


async def test_a_runtimes_documented_rules_refuse_a_script_without_shebang_holding_rm_rf_root(
    runner: Runner, publish_tool: Callable[..., str]
) -> None:
    """Regression: a runtime with the documents' shebang rule and a blocking `rm -rf /` rule
    (`validation: {rules: [...]}`) still ran a script with no shebang that contains `rm -rf /`."""
    runtime = publish_tool(
        "documented_bash",
        {
            "tool_type": "runtime",
            "executor": "subprocess",
            "config": {
                "command": "bash",
                "args": ["{entrypoint}"],
                "validation": {
                    "rules": [
                        {"type": "shebang_required", "pattern": "^#!"},
                        {
                            "type": "pattern_check",
                            "patterns": {"dangerous": ["rm -rf /", ":(){ :|:& };:"]},
                            "block": True,
                        },
                        {"type": "syntax_check", "command": "bash -n {entrypoint}"},
                    ]
                },
            },
        },
    )
    script = publish_tool(
        "no_shebang",
        {"tool_type": "script", "executor": runtime},
        {"run.sh": "echo hi\nrm -rf /\n"},
        entrypoint="run.sh",
    )
    result = await runner.run(script)
    assert isinstance(result.failure, Refused), result
    assert "run.sh:1: the entrypoint must start with a shebang line" in result.error
    assert "run.sh:2: dangerous pattern ('rm -rf /')" in result.error
    fine = publish_tool(
        "with_shebang", {"tool_type": "script", "executor": runtime}, {"run.sh": "#!/bin/bash\necho fine\n"}
    )
    assert (await runner.run(fine)).output == "fine"
    broken = publish_tool(
        "bad_bash", {"tool_type": "script", "executor": runtime}, {"run.sh": "#!/bin/bash\nif then fi (\n"}
    )
    refused = await runner.run(broken)
    assert isinstance(refused.failure, Refused) and "syntax check failed" in refused.error


async def test_a_documents_python_tool_reads_its_parameter_from_sys_argv(
    runner: Runner, publish_tool: Callable[..., str]
) -> None:
    """Regression: the documents' Python tools read `sys.argv[1]`, which failed with IndexError:
    python_runtime passes the parameters' values after the script, in their declared order."""
    main = (
        "import json\nimport sys\n\n\ndef run(text, style='plain'):\n"
        "    return {'shout': text.upper(), 'style': style}\n\n\n"
        "if __name__ == '__main__':\n    result = run(*sys.argv[1:])\n    print(json.dumps(result))\n"
    )
    tool = publish_tool(
        "analyze_text",
        {
            "tool_type": "script",
            "executor": "python_runtime",
            "config": {"entrypoint": "main.py"},
            "parameters": [
                {"name": "text", "type": "string", "required": True},
                {"name": "style", "type": "string"},
            ],
        },
        {"main.py": main},
    )
    result = await runner.run(tool, {"text": "it's a -v --flag; $(x)"})
    assert result.status == "success", result.error
    assert result.output == {"shout": "IT'S A -V --FLAG; $(X)", "style": "plain"}
    styled = await runner.run(tool, {"style": "loud", "text": "hi"})
    assert styled.output == {"shout": "HI", "style": "loud"}, "in the order the manifest declares them"


async def test_a_multi_file_script_names_its_entrypoint_in_config_alone(
    runner: Runner, publish_tool: Callable[..., str], conn: psycopg.Connection
) -> None:
    """Regression (issue 15): the documents put `entrypoint` in the config; publish refused a
    multi-file script that named it only there, and marked no file as the entrypoint."""
    helper = "def shout(text):\n    return text.upper()\n"
    main = "import json\nimport sys\n\nfrom helper import shout\n\nprint(json.dumps({'out': shout(sys.argv[1])}))\n"
    tool = publish_tool(
        "two_files",
        {
            "tool_type": "script",
            "executor": "python_runtime",
            "config": {"entrypoint": "main.py"},
            "parameters": [{"name": "text", "type": "string", "required": True}],
        },
        {"helper.py": helper, "main.py": main},
    )
    marked = conn.execute(
        "select f.path from tool_version_files f join tool_versions v on v.id = f.version_id"
        " join tools t on t.id = v.tool_uuid where t.ref = %s and f.is_entrypoint",
        (tool,),
    ).fetchall()
    assert marked == [("main.py",)]
    result = await runner.run(tool, {"text": "hi"})
    assert result.status == "success", result.error
    assert result.output == {"out": "HI"}


def test_a_config_entrypoint_that_is_not_a_file_is_refused_naming_it(
    publish_tool: Callable[..., str],
) -> None:
    manifest = {"tool_type": "script", "executor": "python_runtime", "config": {"entrypoint": "nope.py"}}
    with pytest.raises(psycopg.errors.Error, match=r'entrypoint: "nope.py" is not among the files \(a.py, b.py\)'):
        publish_tool("bad_entry", manifest, {"a.py": "print(1)", "b.py": "print(2)"})


# --- bad input, broken tools, integrity -----------------------------------------------------


async def test_bad_parameters_are_refused_before_anything_runs_and_recorded(
    runner: Runner, conn: psycopg.Connection
) -> None:
    result = await runner.run("format_bytes", {"bytes": "lots", "binary": "yes"})
    assert result.status == "error"
    assert isinstance(result.failure, InvalidParameters)
    assert len(result.failure.problems) == 2
    assert "bytes:" in result.error and "binary:" in result.error
    record = await record_of(runner, conn, result)
    assert record["status"] == "error" and "bytes:" in record["error_summary"]
    outside = {k: v for k, v in record.items() if k != "payload"}
    assert "lots" not in json.dumps(outside, default=str), "parameter values are kept only in the payload"
    assert record["payload"]["params"] == {"bytes": "lots", "binary": "yes"}, "the refused parameters, for a person"


async def test_a_record_hashes_the_parameters_as_they_were_run(runner: Runner, conn: psycopg.Connection) -> None:
    """Records are made behind the runs; the parameters' digest is not: a caller that reuses
    its parameters dict once the run returns does not change what the record says ran."""
    params = {"name": "Ada"}
    result = await runner.run("hello_world", params)
    params["name"] = "Grace, who did not run"
    record = await record_of(runner, conn, result)
    assert (record["params_sha256"], record["params_size"]) == params_digest({"name": "Ada"})
    started = record["started_at"].timestamp()
    assert record["finished_at"].timestamp() - started == pytest.approx(result.duration_ms / 1000, abs=0.002)

    nested = {"name": ["Ada"]}  # refused (not a string), recorded all the same; a shallow copy is not enough
    refused = await runner.run("hello_world", nested)
    nested["name"].append("Grace")
    record = await record_of(runner, conn, refused)
    assert (record["params_sha256"], record["params_size"]) == params_digest({"name": ["Ada"]})


async def test_a_record_hashes_the_parameters_given_and_its_audit_row_those_checked(
    runner: Runner, conn: psycopg.Connection
) -> None:
    """The gate hashes the parameters it checked (defaults filled in), the record those given:
    the record takes the gate's digest only when the two are the same parameters."""
    for given, checked in (({"bytes": 1024}, {"bytes": 1024, "binary": False}), ({"bytes": 1, "binary": True},) * 2):
        result = await runner.run("format_bytes", dict(given))
        assert result.ok, result.error
        record = await record_of(runner, conn, result)
        assert (record["params_sha256"], record["params_size"]) == params_digest(given)
        row = conn.execute("select params_sha256, params_size from audit_log where run_id = %s", (result.run_id,))
        assert row.fetchone() == params_digest(checked)


async def test_an_unknown_tool_is_not_found_and_recorded(runner: Runner, conn: psycopg.Connection) -> None:
    result = await runner.run("no_such_tool_anywhere")
    assert isinstance(result.failure, NotFound)
    assert "no_such_tool_anywhere" in result.error
    assert (await record_of(runner, conn, result))["tool_id"] == "no_such_tool_anywhere"


async def test_a_missing_interpreter_is_a_clear_error(runner: Runner, publish_tool: Callable[..., str]) -> None:
    runtime = publish_tool(
        "ghost_runtime",
        {
            "tool_type": "runtime",
            "executor": "subprocess",
            "config": {"command": "kiwi-no-such-interpreter", "args": ["{entrypoint}"]},
        },
    )
    script = publish_tool(
        "ghost_script", {"tool_type": "script", "executor": runtime}, {"run.txt": "x"}, entrypoint="run.txt"
    )
    result = await runner.run(script)
    assert result.status == "error"
    assert isinstance(result.failure, PrimitiveError)
    assert "command not found: kiwi-no-such-interpreter" in result.error


async def test_a_file_altered_in_the_database_is_refused_by_its_sha256(
    database_url: str, tmp_path: Path, conn: psycopg.Connection, publish_tool: Callable[..., str]
) -> None:
    tool = publish_tool(
        "tampered",
        {"tool_type": "script", "executor": "bash_runtime"},
        {"run.sh": "echo honest\n"},
        entrypoint="run.sh",
    )
    runner = Runner(PostgresRegistry(database_url, principal=local_owner()), local_settings(database_url, tmp_path))
    try:
        assert (await runner.run(tool)).output == "honest"
        # The file table checks sha256 against content itself (a constraint even replica mode
        # obeys), so alter the copy the runner is served: the cached plan.
        conn.execute(
            "update kiwi_internal.plan_cache set plan = jsonb_set(plan, '{files,0,content_text}', '\"echo evil\"')"
            " where tool_ref = %s",
            (tool,),
        )
        result = await runner.run(tool)
    finally:
        await runner.aclose()
    assert result.status == "error"
    assert isinstance(result.failure, IntegrityError)
    assert "run.sh does not match its sha256" in result.error


async def test_a_materialised_file_changed_on_disk_is_refused(
    database_url: str, tmp_path: Path, publish_tool: Callable[..., str]
) -> None:
    tool = publish_tool(
        "disk_tamper",
        {"tool_type": "script", "executor": "bash_runtime"},
        {"run.sh": "echo honest\n"},
        entrypoint="run.sh",
    )
    runner = Runner(PostgresRegistry(database_url, principal=local_owner()), local_settings(database_url, tmp_path))
    try:
        first = await runner.run(tool)
        (script,) = tmp_path.glob("tools/*/run.sh")
        script.write_text("echo evil\n")
        second = await runner.run(tool)
    finally:
        await runner.aclose()
    assert first.output == "honest"
    assert isinstance(second.failure, IntegrityError) and "changed on disk" in second.error


async def test_a_blocking_validation_pattern_refuses_the_run(runner: Runner, publish_tool: Callable[..., str]) -> None:
    tool = publish_tool(
        "rm_root",
        {"tool_type": "script", "executor": "bash_runtime"},
        {"run.sh": "echo hi\nrm -rf /\n"},
        entrypoint="run.sh",
    )
    result = await runner.run(tool)
    assert isinstance(result.failure, Refused)
    assert "run.sh:2: refuses to delete the filesystem root" in result.error


async def test_a_syntax_error_is_refused_before_running(runner: Runner, publish_tool: Callable[..., str]) -> None:
    tool = publish_tool(
        "bad_syntax",
        {"tool_type": "script", "executor": "bash_runtime"},
        {"run.sh": "touch ran_anyway\nif then fi (\n"},
        entrypoint="run.sh",
    )
    result = await runner.run(tool)
    assert isinstance(result.failure, Refused)
    assert "syntax check failed" in result.error


async def test_a_warning_pattern_lets_the_run_go_with_a_warning(
    runner: Runner, publish_tool: Callable[..., str]
) -> None:
    tool = publish_tool(
        "warned",
        {"tool_type": "script", "executor": "bash_runtime"},
        {"run.sh": "# curl https://x | sh\necho fine\n"},
        entrypoint="run.sh",
    )
    result = await runner.run(tool)
    assert result.status == "success" and result.output == "fine"
    assert any("piping a download into a shell" in w for w in result.warnings)


async def test_dry_run_shows_the_chain_and_validation_without_running(
    runner: Runner, publish_tool: Callable[..., str], tmp_path: Path
) -> None:
    marker = tmp_path / "ran"
    tool = publish_tool(
        "dry", {"tool_type": "script", "executor": "bash_runtime"}, {"run.sh": f"touch {marker}\n"}, entrypoint="run.sh"
    )
    result = await runner.run(tool, dry_run=True)
    assert result.status == "success"
    assert result.output["executor_chain"] == [tool, "bash_runtime", "subprocess"]
    assert result.output["validation"]["passed"] is True
    assert not marker.exists()
    assert result.run_id is None, "a dry run is not a run"


# --- secrets ----------------------------------------------------------------------------------


class Leaky(BaseHTTPRequestHandler):
    """A server that echoes the Authorization header it got in a 500 error body."""

    def do_GET(self) -> None:
        body = f"internal error; you sent {self.headers.get('Authorization')}".encode()
        self.send_response(500)
        self.send_header("Content-Length", str(len(body)))
        self.end_headers()
        self.wfile.write(body)

    def log_message(self, *args: object) -> None:
        pass


async def test_no_secret_reaches_run_records_or_errors(
    database_url: str, shared_cache: Path, conn: psycopg.Connection, publish_tool: Callable[..., str]
) -> None:
    secret = "kiwi-test-secret-9f8e7d6c"
    server = ThreadingHTTPServer(("127.0.0.1", 0), Leaky)
    threading.Thread(target=server.serve_forever, daemon=True).start()
    api = publish_tool(
        "leaky_api",
        {
            "tool_type": "api",
            "executor": "http_client",
            "config": {
                "url": f"http://127.0.0.1:{server.server_port}/x",
                "auth": {"type": "bearer", "token": "${LEAKY_TOKEN}"},
                "retry": {"attempts": 1},
            },
        },
    )
    script = publish_tool(
        "leaky_script",
        {"tool_type": "script", "executor": "bash_runtime", "config": {"env": {"TOKEN": "${LEAKY_TOKEN}"}}},
        {"run.sh": 'echo "token is $TOKEN" >&2; exit 3\n'},
        entrypoint="run.sh",
    )
    runner = Runner(
        PostgresRegistry(database_url, principal=local_owner()),
        local_settings(database_url, shared_cache),
        environ={**os.environ, "LEAKY_TOKEN": secret},
    )
    try:
        results = [await runner.run(api), await runner.run(script)]
    finally:
        await runner.aclose()
        server.shutdown()
    for result in results:
        assert result.status == "error"
        text = json.dumps([result.as_json(), result.detail, await record_of(runner, conn, result)], default=str)
        assert "***" in text, "the leaked secret was scrubbed, not dropped silently"
        assert secret not in text, text[max(0, text.find(secret) - 300) : text.find(secret) + 50]


# --- concurrency and caches -----------------------------------------------------------------


async def test_twenty_concurrent_runs_of_one_tool_all_succeed(runner: Runner) -> None:
    results = await asyncio.gather(*(runner.run("hello_world", {"name": f"n{i}"}) for i in range(20)))
    assert [r.status for r in results] == ["success"] * 20
    assert sorted(r.output["greeting"] for r in results) == sorted(f"Hello, n{i}!" for i in range(20))


async def test_the_environment_is_built_once_even_when_runs_race_and_reused_after(
    database_url: str, tmp_path: Path
) -> None:
    lines: list[str] = []
    runner = Runner(
        PostgresRegistry(database_url, principal=local_owner()),
        local_settings(database_url, tmp_path),
        on_progress=lines.append,
    )
    try:
        first = await asyncio.gather(*(runner.run("format_bytes", {"bytes": 2048 * i}) for i in range(1, 6)))
        built = [line for line in lines if line.startswith("preparing environment")]
        (env_dir,) = (tmp_path / "envs").glob("*/.kiwi-ready")
        ready_at = env_dir.stat().st_mtime_ns
        lines.clear()
        again = await runner.run("format_bytes", {"bytes": 1})
    finally:
        await runner.aclose()
    assert [r.status for r in first] == ["success"] * 5, [r.error for r in first]
    assert len(built) == 2, f"uv venv and uv pip install ran once for five racing runs: {built}"
    assert again.status == "success" and lines == [], "the second run found the environment ready"
    assert env_dir.stat().st_mtime_ns == ready_at


async def test_a_plan_given_to_run_is_the_one_that_runs_and_is_not_fetched_again(runner: Runner) -> None:
    """The MCP server checks permissions against a plan, then runs exactly that plan."""
    plan = await runner.plan("hello_world")
    fetched: list[str] = []
    fetch = runner.registry.execution_plan

    async def counting(tool_id: str, version: str | None = None) -> dict[str, Any]:
        fetched.append(tool_id)
        return await fetch(tool_id, version)

    runner.registry.execution_plan = counting  # type: ignore[method-assign]
    result = await runner.run("hello_world", {"name": "Ada"}, plan=plan)
    assert result.output == {"greeting": "Hello, Ada!"} and fetched == []
