"""Direct mode (`kiwi serve --directive REF`, runner/mcp_server/direct.py): a directive's tool context as
ordinary MCP tools, every call through the same gate as `execute run`.

Real parts only: the real database, real bash tools, the SDK's own client in memory, over
stdio and over streamable HTTP (a real `kiwi serve` process with a real token).
"""

from __future__ import annotations

import subprocess
import sys
import uuid
import warnings
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import Any

import psycopg
import pytest
from mcp import Client
from mcp.client.stdio import StdioServerParameters
from mcp.shared.exceptions import MCPError
from mcp_types import CallToolResult, LoggingMessageNotificationParams
from psycopg.types.json import Jsonb

from runner import (
    LOCAL_JWT_SECRET,
    NotFound,
    PostgresRegistry,
    Runner,
    UsageError,
    admin,
    from_token,
    standard_dispatcher,
)
from runner.mcp_server.direct import APPROVAL_META_KEY, DirectServer, build_direct_server, mcp_name
from runner.testing.http_serving import ROOT, kiwi_http_server, mcp_client, serve_env, user_token
from tests.mcp_server.registry_changes import Inbox, listening, publish, unique

GREET = 'printf \'{"greeting": "Hi, %s!"}\\n\' "$KIWI_PARAM_NAME"'
READ = 'printf \'{"read": "%s"}\\n\' "$KIWI_PARAM_PATH"'


@pytest.fixture
async def runner(make_runner: Callable[..., Runner]) -> Runner:
    return make_runner(dispatcher=standard_dispatcher())


@pytest.fixture
def context(publish_tool: Callable[..., str], conn: psycopg.Connection) -> Iterator[dict[str, str]]:
    """Two bash tools (`greet`: a required name; `read`: a path it reads, declared as config.fs)
    and a directive using both (plus an optional tool that does not exist), whose permissions
    let it read docs/** only."""
    greet = publish_tool(
        "direct_greet",
        {
            "tool_type": "script",
            "executor": "bash_runtime",
            "name": "Greeter",
            "description": "Greets someone by name.",
            "parameters": [{"name": "name", "type": "string", "required": True, "description": "Who to greet."}],
        },
        {"greet.sh": GREET},
        entrypoint="greet.sh",
    )
    read = publish_tool(
        "direct_read",
        {
            "tool_type": "script",
            "executor": "bash_runtime",
            "description": "Reads a file.",
            "config": {"fs": {"read": ["path"]}},
            "parameters": [{"name": "path", "type": "string", "required": True}],
        },
        {"read.sh": READ},
        entrypoint="read.sh",
    )
    directive = publish_tool(
        "direct_directive",
        {
            "tool_type": "directive",
            "executor": "directive_runtime",
            "description": "Greets and reads.",
            "requires": {"tools": [{"id": greet}, {"id": read}, {"id": "no_such_tool_xyz", "required": False}]},
            "permissions": {"tools": [greet, read, "no_such_tool_xyz"], "fs_read": ["docs/**"]},
        },
        {"directive.md": "# Greet, then read\n\nGreet the user, then read docs/intro.md.\n"},
        entrypoint="directive.md",
    )
    yield {"greet": greet, "read": read, "directive": directive}
    conn.execute("delete from audit_log where tool_id = any(%s)", ([greet, read, directive],))


@pytest.fixture
def cleanup(conn: psycopg.Connection) -> Iterator[list[str]]:
    """Sessions whose audit rows and rate limits to remove afterwards."""
    sessions: list[str] = []
    yield sessions
    for session in sessions:
        conn.execute("delete from audit_log where session_id = %s", (session,))


async def direct(runner: Runner, directive: str, cleanup: list[str]) -> DirectServer:
    server = await build_direct_server(runner, directive)
    cleanup.append(server.server_session)
    return server


def text(result: CallToolResult) -> str:
    return "".join(getattr(c, "text", "") for c in result.content)


def audit(conn: psycopg.Connection, session: str) -> list[dict[str, Any]]:
    rows = conn.execute(
        "select to_jsonb(a) from audit_log a where session_id = %s order by at, id", (session,)
    ).fetchall()
    return [r[0] for r in rows]


async def test_the_directives_tools_are_listed_with_their_schemas(
    runner: Runner, context: dict[str, str], cleanup: list[str]
) -> None:
    server = await direct(runner, context["directive"], cleanup)
    async with Client(server) as client:
        listed = {t.name: t for t in (await client.list_tools()).tools}
        assert set(listed) == {context["greet"], context["read"]}  # no meta-tools, no missing optional tool
        greet = listed[context["greet"]]
        assert greet.description == "Greets someone by name." and greet.title == "Greeter"
        schema = greet.input_schema
        assert schema["type"] == "object" and schema["required"] == ["name"]
        assert schema["properties"]["name"]["type"] == "string"
        assert listed[context["read"]].input_schema["required"] == ["path"]
        assert context["directive"] in (client.instructions or "")
        assert "Greet the user, then read docs/intro.md." in (client.instructions or "")
    assert "no_such_tool_xyz" in server.summary()


async def test_a_call_runs_the_real_tool_in_the_directives_context(
    runner: Runner, context: dict[str, str], cleanup: list[str], conn: psycopg.Connection
) -> None:
    server = await direct(runner, context["directive"], cleanup)
    async with Client(server) as client:
        result = await client.call_tool(context["greet"], {"name": "Ada"})
        again = await client.call_tool(context["greet"], {"name": "Lin"})
    assert not result.is_error, text(result)
    assert result.structured_content is not None
    assert result.structured_content["output"] == {"greeting": "Hi, Ada!"}
    assert result.structured_content["status"] == "success"
    assert again.structured_content is not None and again.structured_content["output"] == {"greeting": "Hi, Lin!"}
    await runner.flush_records()
    rows = audit(conn, server.server_session)
    # one context for the session (opened once, audited), then each run, allowed, in it
    assert [(r["action"], r["decision"]) for r in rows] == [
        ("open_context", "allowed"),
        ("run", "allowed"),
        ("run", "allowed"),
    ]
    directive = f"{context['directive']}@1.0.0"
    assert (rows[0]["tool_id"], rows[0]["version"]) == (context["directive"], "1.0.0")
    assert all(r["directive"] == directive and r["outcome"] == "success" for r in rows[1:])
    assert {r["tool_id"] for r in rows[1:]} == {context["greet"]}


async def test_the_gate_refuses_what_the_directive_does_not_permit(
    runner: Runner, context: dict[str, str], cleanup: list[str], conn: psycopg.Connection
) -> None:
    server = await direct(runner, context["directive"], cleanup)
    async with Client(server) as client:
        allowed = await client.call_tool(context["read"], {"path": "docs/intro.md"})
        refused = await client.call_tool(context["read"], {"path": "/etc/passwd"})
    assert not allowed.is_error and allowed.structured_content is not None
    assert allowed.structured_content["output"] == {"read": "docs/intro.md"}
    assert refused.is_error
    assert refused.structured_content is not None
    assert refused.structured_content["error"]["kind"] == "permission_denied"
    assert "fs_read" in text(refused) and "/etc/passwd" in text(refused)
    await runner.flush_records()
    runs = [r for r in audit(conn, server.server_session) if r["action"] == "run"]
    assert [(r["decision"], r["outcome"]) for r in runs] == [("allowed", "success"), ("refused", None)]
    assert "fs_read" in runs[1]["reason"]


async def test_the_gate_applies_rate_limits(
    runner: Runner, context: dict[str, str], cleanup: list[str], conn: psycopg.Connection
) -> None:
    limit = conn.execute(
        "insert into rate_limits (scope, key, max_calls, per_seconds) values ('tool', %s, 1, 3600) returning id",
        (context["greet"],),
    ).fetchone()
    try:
        server = await direct(runner, context["directive"], cleanup)
        async with Client(server) as client:
            first = await client.call_tool(context["greet"], {"name": "Ada"})
            second = await client.call_tool(context["greet"], {"name": "Ada"})
    finally:
        assert limit is not None
        conn.execute("delete from rate_limits where id = %s", (limit[0],))
    assert not first.is_error, text(first)
    assert second.is_error and second.structured_content is not None
    assert second.structured_content["error"]["kind"] == "rate_limited"


async def test_invalid_arguments_are_a_clear_tool_error(
    runner: Runner, context: dict[str, str], cleanup: list[str], conn: psycopg.Connection
) -> None:
    server = await direct(runner, context["directive"], cleanup)
    async with Client(server) as client:
        missing = await client.call_tool(context["greet"], {})
        wrong = await client.call_tool(context["greet"], {"name": 5})
    for result in (missing, wrong):
        assert result.is_error
        assert f"invalid parameters for {context['greet']}" in text(result)
        assert "tools/list" in text(result) and "load(" not in text(result)
        assert result.structured_content is not None and "tools/list" in result.structured_content["hint"]
    assert "name" in text(missing)
    await runner.flush_records()
    runs = [r for r in audit(conn, server.server_session) if r["action"] == "run"]
    assert [r["decision"] for r in runs] == ["refused", "refused"]  # nothing ran


async def test_a_tool_outside_the_context_is_an_unknown_tool(
    runner: Runner, context: dict[str, str], cleanup: list[str]
) -> None:
    server = await direct(runner, context["directive"], cleanup)
    async with Client(server) as client:
        with pytest.raises(MCPError) as raised:
            await client.call_tool("hello_world", {"name": "x"})
    assert raised.value.code == -32602
    assert "Unknown tool: hello_world" in raised.value.message and context["directive"] in raised.value.message


async def test_start_up_refuses_what_is_not_a_usable_directive(
    runner: Runner, context: dict[str, str], publish_tool: Callable[..., str]
) -> None:
    with pytest.raises(NotFound):
        await build_direct_server(runner, f"no_such_directive_{uuid.uuid4().hex[:8]}")
    with pytest.raises(UsageError, match="is a script, not a directive"):
        await build_direct_server(runner, context["greet"])
    needy = publish_tool(
        "direct_needy",
        {
            "tool_type": "directive",
            "executor": "directive_runtime",
            "requires": {"tools": [{"id": "no_such_tool_xyz"}]},
            "permissions": {"tools": ["no_such_tool_xyz"]},
        },
        {"d.md": "x"},
        entrypoint="d.md",
    )
    with pytest.raises(UsageError, match="requires no_such_tool_xyz, which is not available"):
        await build_direct_server(runner, needy)


async def test_an_invisible_directive_is_refused_at_start_up(
    runner: Runner, database_url: str, conn: psycopg.Connection
) -> None:
    """Another tenant's private directive does not exist for the server's principal."""
    owner, namespace = str(uuid.uuid4()), f"direct_{uuid.uuid4().hex[:10]}"
    conn.execute("insert into namespaces (namespace, owner_id) values (%s, %s)", (namespace, owner))
    tenant = PostgresRegistry(database_url, principal=from_token(user_token(owner), secret=LOCAL_JWT_SECRET))
    try:
        manifest = {
            "tool_id": "secret_directive",
            "namespace": namespace,
            "tool_type": "directive",
            "executor": "directive_runtime",
            "version": "1.0.0",
            "visibility": "private",
            "entrypoint": "d.md",
        }
        await tenant.publish(manifest, [{"path": "d.md", "content_text": "secret", "is_entrypoint": True}])
        assert (await tenant.plan(f"{namespace}/secret_directive")).tool_type == "directive"  # its owner sees it
        with pytest.raises(NotFound):
            await build_direct_server(runner, f"{namespace}/secret_directive")
    finally:
        await tenant.aclose()
        conn.execute("delete from tools where namespace = %s", (namespace,))
        conn.execute("delete from namespaces where namespace = %s", (namespace,))


def test_mcp_names_are_valid_tool_names() -> None:
    assert mcp_name("public/greet") == "greet"
    assert mcp_name("acme/greet") == "acme_greet"
    assert mcp_name("github_mcp.create_issue") == "github_mcp.create_issue"


async def test_over_stdio(database_url: str, tmp_path: Path, context: dict[str, str]) -> None:
    params = StdioServerParameters(
        command=sys.executable,
        args=["-m", "runner.cli.serve", "--transport", "stdio", "--directive", context["directive"]],
        env=serve_env(database_url, tmp_path / "cache"),
        cwd=str(ROOT),
    )
    async with Client(params) as client:
        assert {t.name for t in (await client.list_tools()).tools} == {context["greet"], context["read"]}
        result = await client.call_tool(context["greet"], {"name": "Stdio"})
    assert not result.is_error and result.structured_content is not None
    assert result.structured_content["output"] == {"greeting": "Hi, Stdio!"}


async def test_over_http_as_the_caller(database_url: str, tmp_path: Path, context: dict[str, str]) -> None:
    with kiwi_http_server(database_url, tmp_path, "--directive", context["directive"]) as served:
        assert "direct mode: the tool context of" in served.stderr()
        async with mcp_client(served.url, user_token()) as client:
            assert {t.name for t in (await client.list_tools()).tools} == {context["greet"], context["read"]}
            result = await client.call_tool(context["greet"], {"name": "Http"})
            refused = await client.call_tool(context["read"], {"path": "/etc/shadow"})
    assert not result.is_error and result.structured_content is not None
    assert result.structured_content["output"] == {"greeting": "Hi, Http!"}
    assert refused.is_error and refused.structured_content is not None
    assert refused.structured_content["error"]["kind"] == "permission_denied"


@pytest.mark.parametrize("transport", ["stdio", "http"])
def test_an_unknown_directive_stops_start_up_with_an_exit_status(
    database_url: str, tmp_path: Path, transport: str
) -> None:
    name = f"no_such_directive_{uuid.uuid4().hex[:8]}"
    done = subprocess.run(
        [sys.executable, "-m", "runner.cli", "serve", "--transport", transport, "--port", "0", "--directive", name],
        cwd=ROOT,
        env=serve_env(database_url, tmp_path / "cache"),
        stdin=subprocess.DEVNULL,
        capture_output=True,
        text=True,
        timeout=60,
    )
    assert done.returncode != 0, done.stderr
    assert name in done.stderr and "serving" not in done.stderr


# --- the list stays current (registry NOTIFY), logging, approvals through _meta --------------

TOOLS_CHANGED = "notifications/tools/list_changed"


def republish_directive(conn: psycopg.Connection, directive: str, version: str, tools: list[str]) -> None:
    """A new version of the fixture's directive that requires only `tools` (as an admin, the way
    its owner's `kiwi publish` elsewhere would)."""
    manifest = {
        "tool_id": directive,
        "version": version,
        "tool_type": "directive",
        "executor": "directive_runtime",
        "description": "Greets and reads.",
        "requires": {"tools": [{"id": t} for t in tools]},
        "permissions": {"tools": tools, "fs_read": ["docs/**"]},
        "entrypoint": "directive.md",
    }
    files = [{"path": "directive.md", "content_text": "# Fewer tools\n", "is_entrypoint": True}]
    conn.execute("select publish_tool_version(%s, %s)", (Jsonb(manifest), Jsonb(files)))


@pytest.fixture
def cleanup_refs(conn: psycopg.Connection) -> Iterator[list[str]]:
    """Registry items a test published itself, deleted afterwards."""
    refs: list[str] = []
    yield refs
    for ref in refs:
        conn.execute("delete from tools where ref = %s", (ref,))


async def test_the_list_follows_the_registry_and_a_tool_that_left_is_unknown(
    runner: Runner,
    context: dict[str, str],
    cleanup: list[str],
    cleanup_refs: list[str],
    conn: psycopg.Connection,
    database_url: str,
) -> None:
    server = await direct(runner, context["directive"], cleanup)
    inbox = Inbox()
    async with Client(server, mode="legacy", message_handler=inbox) as client:
        caps = client.server_capabilities
        assert caps.tools and caps.tools.list_changed, "tools.listChanged is declared"
        assert caps.logging is not None, "the logging capability is declared"
        assert not (caps.resources and caps.resources.subscribe), "no resources to subscribe to here"
        assert {t.name for t in (await client.list_tools()).tools} == {context["greet"], context["read"]}
        assert not (await client.call_tool(context["read"], {"path": "docs/a.md"})).is_error
        assert await listening(database_url) >= 1

        unrelated = publish(conn, unique("unrelated"))  # a change outside the context: re-read, not told
        cleanup_refs.append(unrelated)
        republish_directive(conn, context["directive"], "1.1.0", [context["greet"]])
        await inbox.wait_for(TOOLS_CHANGED)
        assert inbox.count(TOOLS_CHANGED) == 1, inbox.got
        assert {t.name for t in (await client.list_tools()).tools} == {context["greet"]}
        with pytest.raises(MCPError) as raised:
            await client.call_tool(context["read"], {"path": "docs/a.md"})
        assert raised.value.code == -32602 and f"Unknown tool: {context['read']}" in raised.value.message
        greeted = await client.call_tool(context["greet"], {"name": "Ada"})
        assert not greeted.is_error, text(greeted)

        conn.execute("select delete_tool(%s)", (context["greet"],))  # its last tool is deleted
        await inbox.wait_for(TOOLS_CHANGED, after=1)
        assert (await client.list_tools()).tools == []
    await runner.flush_records()
    opened = [r for r in audit(conn, server.server_session) if r["action"] == "open_context"]
    assert [r["version"] for r in opened] == ["1.0.0", "1.1.0"], "the new version gets a context of its own"


async def test_a_tools_stderr_streams_as_log_notifications(
    runner: Runner, publish_tool: Callable[..., str], cleanup: list[str]
) -> None:
    talker = publish_tool(
        "direct_talker",
        {"tool_type": "script", "executor": "bash_runtime", "description": "Talks on stderr."},
        {"t.sh": 'echo "first line" >&2\nsleep 0.1\necho "WARNING: second line" >&2\necho \'{"ok": true}\''},
        entrypoint="t.sh",
    )
    directive = publish_tool(
        "direct_talking",
        {
            "tool_type": "directive",
            "executor": "directive_runtime",
            "requires": {"tools": [{"id": talker}]},
            "permissions": {"tools": [talker]},
        },
        {"d.md": "Talk."},
        entrypoint="d.md",
    )
    server = await direct(runner, directive, cleanup)
    logs: list[LoggingMessageNotificationParams] = []
    progress: list[float] = []

    async def heard(params: LoggingMessageNotificationParams) -> None:
        logs.append(params)

    async def moved(done: float, total: float | None, message: str | None) -> None:
        progress.append(done)

    with warnings.catch_warnings():  # MCP logging is deprecated from 2026-07-28; 2025 has it
        warnings.simplefilter("ignore")
        async with Client(server, mode="legacy", logging_callback=heard) as client:
            await client.set_logging_level("warning")
            result = await client.call_tool(talker, {}, progress_callback=moved)
    assert not result.is_error, text(result)
    assert [(p.level, p.data, p.logger) for p in logs] == [("warning", "WARNING: second line", talker)]
    assert len(progress) >= 2 and progress == sorted(progress), progress


@pytest.fixture
def guarded(publish_tool: Callable[..., str], conn: psycopg.Connection, tmp_path: Path) -> Iterator[dict[str, str]]:
    """A tool under an approval policy (it appends to its marker file, in `marks`, when it
    runs) and a directive requiring it; the policy, approvals and audit rows are removed
    afterwards. The tool's sandbox may write `marks` (an admin publishes it, and may grant
    that; the directory is writable by the sandbox's user, nobody), and the directive
    permits that write, as it must for the tool it requires."""
    marks = tmp_path / "marks"
    marks.mkdir()
    marks.chmod(0o777)
    tool = publish_tool(
        "direct_guarded",
        {
            "tool_type": "script",
            "executor": "bash_runtime",
            "parameters": [{"name": "marker", "type": "string", "required": True}],
            "config": {"sandbox": {"fs": {"write": [str(marks)]}}},
        },
        {"g.sh": 'echo ran >> "$KIWI_PARAM_MARKER"; echo \'{"ran": true}\''},
        entrypoint="g.sh",
    )
    directive = publish_tool(
        "direct_guarding",
        {
            "tool_type": "directive",
            "executor": "directive_runtime",
            "requires": {"tools": [{"id": tool}]},
            "permissions": {"tools": [tool], "fs_write": [str(marks)]},
        },
        {"d.md": "Run the guarded tool."},
        entrypoint="d.md",
    )
    conn.execute("insert into approval_policies (pattern, ttl_seconds) values (%s, 3600)", (tool,))
    yield {"tool": tool, "directive": directive, "marks": str(marks)}
    conn.execute("delete from approval_policies where pattern = %s", (tool,))
    conn.execute("delete from approvals where tool_id = %s", (tool,))
    conn.execute("delete from audit_log where tool_id = any(%s)", ([tool, directive],))


async def test_an_approval_travels_in_meta_and_runs_once(
    runner: Runner, guarded: dict[str, str], cleanup: list[str], database_url: str
) -> None:
    tool, marker = guarded["tool"], Path(guarded["marks"]) / "marker.txt"
    arguments = {"marker": str(marker)}
    server = await direct(runner, guarded["directive"], cleanup)
    person = PostgresRegistry(database_url, principal=admin())
    try:
        async with Client(server) as client:
            pending = await client.call_tool(tool, arguments)
            assert pending.is_error and pending.structured_content is not None, text(pending)
            assert pending.structured_content["error"]["kind"] == "approval_pending"
            aid = pending.structured_content["approval"]["id"]
            assert f'{{"_meta": {{"{APPROVAL_META_KEY}": "{aid}"}}}}' in text(pending), text(pending)
            assert f"kiwi approve {aid}" in text(pending) and "execute(" not in text(pending)
            assert pending.structured_content["retry"] == {"_meta": {APPROVAL_META_KEY: aid}}
            assert not marker.exists(), "nothing ran"

            early = await client.call_tool(tool, arguments, meta={APPROVAL_META_KEY: aid})
            assert early.structured_content is not None and "pending" in text(early)
            assert early.structured_content["error"]["kind"] == "approval_refused"
            await person.decide_approval(aid, True, "fine", f"person-{uuid.uuid4()}")

            first = await client.call_tool(tool, arguments, meta={APPROVAL_META_KEY: aid})
            assert not first.is_error, text(first)
            assert marker.read_text().splitlines() == ["ran"]
            again = await client.call_tool(tool, arguments, meta={APPROVAL_META_KEY: aid})
            assert again.is_error and again.structured_content is not None
            assert again.structured_content["error"]["kind"] == "approval_refused" and "already used" in text(again)
            assert APPROVAL_META_KEY in again.structured_content["error"]["hint"]
            assert marker.read_text().splitlines() == ["ran"], "an approval runs its call once"

            with pytest.raises(MCPError) as raised:
                await client.call_tool(tool, arguments, meta={APPROVAL_META_KEY: 5})
            assert raised.value.code == -32602
    finally:
        await person.aclose()
