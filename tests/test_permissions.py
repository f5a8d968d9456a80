"""Permissions through Kiwi's MCP server, against the real database.

Running a directive opens an execution context holding its declared permissions; a call
made with that context outside them is refused, naming the permission it lacks, and the
refusal is audited with the directive. A child context narrows, never widens.
"""

from __future__ import annotations

import uuid
from collections.abc import AsyncIterator, Callable, Iterator
from contextlib import asynccontextmanager
from pathlib import Path
from typing import Any

import psycopg
import pytest
from mcp import Client
from mcp_types import CallToolResult

from runner import PostgresRegistry, Runner, build_server, local_owner, standard_dispatcher
from runner.policy.permissions import KINDS, check, covers, names_paths, needs, shell_command
from tests.conftest import local_settings


@pytest.fixture
def session(conn: psycopg.Connection) -> Iterator[str]:
    sid = f"test-permissions-{uuid.uuid4()}"
    yield sid
    conn.execute("delete from audit_log where session_id = %s", (sid,))
    conn.execute("delete from execution_contexts where session_id = %s", (sid,))


@asynccontextmanager
async def kiwi(database_url: str, cache_dir: Path, session: str) -> AsyncIterator[Client]:
    settings = local_settings(database_url, cache_dir)
    runner = Runner(PostgresRegistry(database_url, principal=local_owner()), settings, dispatcher=standard_dispatcher())
    try:
        async with Client(build_server(runner, session_id=session)) as client:
            yield client
    finally:
        await runner.aclose()


def text_of(result: CallToolResult) -> str:
    return "\n".join(getattr(block, "text", "") for block in result.content)


def audit_rows(conn: psycopg.Connection, session_id: str) -> list[dict[str, Any]]:
    rows = conn.execute(
        "select to_jsonb(a) from audit_log a where session_id = %s order by at, id", (session_id,)
    ).fetchall()
    return [r[0] for r in rows]


def directive(publish_tool: Callable[..., str], permissions: dict[str, list[str]]) -> str:
    return publish_tool(
        "perm_directive",
        {"tool_type": "directive", "executor": "directive_runtime", "permissions": permissions},
        {"d.md": "# Greet people\n"},
        entrypoint="d.md",
    )


async def test_a_directive_context_allows_its_tools_and_refuses_others_naming_the_permission(
    database_url: str, conn: psycopg.Connection, tmp_path: Path, publish_tool: Callable[..., str], session: str
) -> None:
    d = directive(publish_tool, {"tools": ["hello_world"], "shell": ["bash"]})
    async with kiwi(database_url, tmp_path, session) as client:
        started = await client.call_tool("execute", {"action": "run", "item_id": d})
        assert not started.is_error, text_of(started)
        ctx = (started.structured_content or {})["context"]
        assert ctx["directive"] == f"{d}@1.0.0" and ctx["permissions"]["tools"] == ["hello_world"]
        assert ctx["id"] in text_of(started), "running a directive says which context to pass on"

        allowed = await client.call_tool(
            "execute",
            {"action": "run", "item_id": "hello_world", "parameters": {"name": "Ada"}, "context": ctx["id"]},
        )
        refused = await client.call_tool(
            "execute",
            {"action": "run", "item_id": "format_bytes", "parameters": {"bytes": 1}, "context": ctx["id"]},
        )
    assert not allowed.is_error, text_of(allowed)
    assert refused.is_error
    lacking = 'tools: format_bytes is not allowed by ["hello_world"]'
    assert (refused.structured_content or {})["error"]["kind"] == "permission_denied"
    assert (refused.structured_content or {})["permission"] == lacking
    assert lacking in text_of(refused) and "hint:" in text_of(refused)

    run_directive, run_hello, refusal = audit_rows(conn, session)
    assert run_directive["directive"] == f"{d}@1.0.0", "the directive's own run names it"
    assert (run_hello["decision"], run_hello["directive"]) == ("allowed", f"{d}@1.0.0")
    assert (refusal["tool_id"], refusal["decision"], refusal["outcome"]) == ("format_bytes", "refused", None)
    assert refusal["directive"] == f"{d}@1.0.0", "the audit row says which directive the call was made under"
    assert refusal["reason"] == f"permission {lacking}"


async def test_a_shell_command_outside_the_permissions_is_refused(
    database_url: str, conn: psycopg.Connection, tmp_path: Path, publish_tool: Callable[..., str], session: str
) -> None:
    d = directive(publish_tool, {"tools": ["hello_world"], "shell": ["python", "uv"]})
    async with kiwi(database_url, tmp_path, session) as client:
        started = await client.call_tool("execute", {"action": "run", "item_id": d})
        ctx = (started.structured_content or {})["context"]["id"]
        refused = await client.call_tool(
            "execute", {"action": "dry_run", "item_id": "hello_world", "parameters": {"name": "A"}, "context": ctx}
        )
    assert refused.is_error
    assert 'shell: bash (run by hello_world) is not allowed by ["python", "uv"]' in text_of(refused)
    assert audit_rows(conn, session)[-1]["decision"] == "refused"


async def test_a_child_context_narrows_and_cannot_widen_its_parents_permissions(
    database_url: str, conn: psycopg.Connection, tmp_path: Path, publish_tool: Callable[..., str], session: str
) -> None:
    d = directive(publish_tool, {"tools": ["hello_world", "format_bytes"], "fs_write": ["tools/**"]})
    async with kiwi(database_url, tmp_path, session) as client:
        parent = await client.call_tool("execute", {"action": "open_context", "item_id": d})
        assert not parent.is_error, text_of(parent)
        parent_id = (parent.structured_content or {})["context"]["id"]

        narrowed = await client.call_tool(
            "execute",
            {"action": "open_context", "context": parent_id, "permissions": {"tools": ["format_bytes"]}},
        )
        assert not narrowed.is_error, text_of(narrowed)
        child = (narrowed.structured_content or {})["context"]
        assert child["parent_id"] == parent_id and child["permissions"]["tools"] == ["format_bytes"]
        assert child["permissions"]["fs_write"] == ["tools/**"], "what the child does not narrow, it keeps"
        in_child = await client.call_tool(
            "execute",
            {"action": "run", "item_id": "hello_world", "parameters": {"name": "A"}, "context": child["id"]},
        )
        assert in_child.is_error and 'tools: hello_world is not allowed by ["format_bytes"]' in text_of(in_child)

        widen = await client.call_tool(
            "execute",
            {"action": "open_context", "context": child["id"], "permissions": {"fs_write": ["**"]}},
        )
        widen_tools = await client.call_tool(
            "execute", {"action": "open_context", "context": child["id"], "permissions": {"tools": ["*"]}}
        )
    assert widen.is_error and (widen.structured_content or {})["error"]["kind"] == "refused"
    assert 'permissions.fs_write: "**" is wider than the parent\'s ["tools/**"]' in text_of(widen)
    assert 'permissions.tools: "*" is wider than the parent\'s ["format_bytes"]' in text_of(widen_tools)
    rows = audit_rows(conn, session)
    refusal = [r for r in rows if r["action"] == "run"][-1]
    assert (refusal["tool_id"], refusal["directive"], refusal["decision"]) == ("hello_world", f"{d}@1.0.0", "refused")
    widened = [r for r in rows if r["action"] == "open_context"][-2:]
    assert [(r["tool_id"], r["decision"]) for r in widened] == [(f"context:{child['id']}", "refused")] * 2


async def test_a_directive_run_under_a_context_cannot_widen_it(
    database_url: str, conn: psycopg.Connection, tmp_path: Path, publish_tool: Callable[..., str], session: str
) -> None:
    outer = directive(publish_tool, {"tools": ["perm_directive_*", "hello_world"]})
    inner = directive(publish_tool, {"tools": ["*"]})
    async with kiwi(database_url, tmp_path, session) as client:
        started = await client.call_tool("execute", {"action": "run", "item_id": outer})
        ctx = (started.structured_content or {})["context"]["id"]
        nested = await client.call_tool("execute", {"action": "run", "item_id": inner, "context": ctx})
    assert nested.is_error
    assert 'permissions.tools: "*" is wider than the parent\'s ["perm_directive_*", "hello_world"]' in text_of(nested)
    refusal = audit_rows(conn, session)[-1]
    assert (refusal["tool_id"], refusal["decision"], refusal["directive"]) == (inner, "refused", f"{outer}@1.0.0")


# --- permissions.check, without a database -------------------------------------------------

ALL = {"fs_read": ["*"], "fs_write": ["*"], "shell": ["*"], "mcp": ["*"], "tools": ["*"], "net": ["*"]}


def plan(tool_id: str, tool_type: str = "script", **extra: Any) -> dict[str, Any]:
    return {"tool_id": tool_id, "tool_type": tool_type, "primitive": "subprocess", **extra}


def test_check_names_the_missing_tools_permission() -> None:
    perms = {**ALL, "tools": ["*_runtime"]}
    assert check(perms, plan("bash_runtime")) is None
    assert check(perms, plan("hello_world")) == 'tools: hello_world is not allowed by ["*_runtime"]'
    assert check({**ALL, "tools": []}, plan("public/x")) == "tools: x is not allowed by []"
    assert check({**ALL, "tools": ["public/x"]}, plan("x")) is None, "public/x is x"


def test_check_matches_mcp_tools_as_server_dot_tool() -> None:
    github = plan(
        "github_mcp.create_issue",
        "mcp_tool",
        chain=[{"tool_id": "github_mcp.create_issue"}, {"tool_id": "github_mcp", "tool_type": "mcp_server"}],
        config={"tool": "create_issue", "command": "npx"},
    )
    assert check({**ALL, "tools": [], "shell": [], "mcp": ["github_mcp.*"]}, github) is None
    assert check({**ALL, "mcp": ["filesystem_mcp.*"]}, github) == (
        'mcp: github_mcp.create_issue is not allowed by ["filesystem_mcp.*"]'
    )


def test_check_matches_the_command_a_subprocess_tool_runs() -> None:
    py = plan("fmt", config={"command": "{env_dir}/bin/python", "args": ["{entrypoint}"]})
    assert shell_command(py) == "python"
    assert check({**ALL, "shell": ["python", "uv"]}, py) is None
    assert check({**ALL, "shell": ["bash"]}, py) == 'shell: python (run by fmt) is not allowed by ["bash"]'
    assert check({k: v for k, v in ALL.items() if k != "shell"}, py) is None, "no shell kind: not checked"
    assert check({**ALL, "shell": []}, plan("http", primitive="http_client")) is None


def test_reading_directives_and_knowledge_needs_no_tools_permission() -> None:
    nothing = {k: [] for k in ALL}
    assert check(nothing, plan("kiwi_tool_authoring", "knowledge")) is None
    assert check(nothing, plan("create_script_tool", "directive")) is None


def test_needs_are_what_check_checks_that_the_parameters_do_not_decide() -> None:
    """What the gate sends public.admit_call for a context it does not hold refuses exactly the
    calls `check` refuses, and names no parameter value."""
    github = plan(
        "github_mcp.create_issue",
        "mcp_tool",
        chain=[{"tool_id": "github_mcp.create_issue"}, {"tool_id": "github_mcp", "tool_type": "mcp_server"}],
        config={"tool": "create_issue", "command": "npx"},
    )
    py = plan("public/fmt", config={"command": "{env_dir}/bin/python"})
    boxed = plan(
        "fetch",
        config={"sandbox": {"network": ["127.0.0.1:8080"], "fs": {"read": ["/srv/data"], "write": ["out"]}}},
    )
    boxed_server = plan(
        "files_mcp.read",
        "mcp_tool",
        chain=[{"tool_id": "files_mcp.read"}, {"tool_id": "files_mcp", "tool_type": "mcp_server"}],
        config={
            "tool": "read",
            "command": "npx",
            "sandbox": {"network": ["127.0.0.1:8080"], "fs": {"read": ["/srv/data"]}},
        },
    )
    plans = [
        github,
        py,
        plan("http", primitive="http_client"),
        plan("d", "directive"),
        plan("k", "knowledge"),
        boxed,
        boxed_server,
    ]
    assert [needs(p) for p in plans] == [
        {"mcp": ["github_mcp.create_issue"]},
        {"tools": ["fmt"], "shell": ["python"]},
        {"tools": ["http"]},
        {},
        {},
        {"tools": ["fetch"], "net": ["127.0.0.1:8080"], "fs_read": ["/srv/data"], "fs_write": ["out"]},
        {"mcp": ["files_mcp.read"], "net": ["127.0.0.1:8080"], "fs_read": ["/srv/data"]},
    ]
    contexts = [
        ALL,
        {k: [] for k in ALL},
        {**ALL, "tools": ["fmt", "h*"], "shell": ["bash"]},
        {**ALL, "mcp": ["x.*"]},
        {**ALL, "net": ["127.0.0.1:*"], "fs_read": [], "fs_write": ["/srv/*", "out"]},
        {**ALL, "net": ["*:443"]},
        {**ALL, "fs_write": ["/srv/*"]},
    ]
    for p in plans:
        for perms in contexts:
            # as public.admit_call covers them: a path mounted read-only by fs_read or fs_write
            def cover(kind: str, perms: dict[str, list[str]] = perms) -> list[str]:
                return perms[kind] + (perms["fs_write"] if kind == "fs_read" else [])

            covered = all(any(covers(g, v) for g in cover(k)) for k, values in needs(p).items() for v in values)
            assert covered == (check(perms, p) is None), (p["tool_id"], perms)
    writes = plan("w", config={"fs": {"write": ["path"]}})
    assert names_paths(writes, {"path": "a"}) and not names_paths(writes, {"other": "a"})
    assert not names_paths(py, {"path": "a"}), "a tool that declares no paths names none"


def test_what_a_tools_sandbox_reaches_is_checked_against_net_and_the_fs_globs() -> None:
    """A call under a context to a tool whose sandbox reaches a host its net globs do not cover,
    or mounts a path its fs globs do not cover, is refused naming the entry; a context without
    net reaches no host."""
    fetch = plan("public/fetch", config={"sandbox": {"network": ["127.0.0.1:8080", "api.example.com:443"]}})
    assert check({**ALL, "net": ["127.0.0.1:*", "*.example.com:443"]}, fetch) is None
    assert check({**ALL, "net": ["127.0.0.1:*"]}, fetch) == (
        'net: api.example.com:443 (reached by fetch) is not allowed by ["127.0.0.1:*"]'
    )
    assert check({k: v for k, v in ALL.items() if k != "net"}, fetch) == (
        "net: 127.0.0.1:8080 (reached by fetch) is not allowed by []"
    ), "a context without net reaches no host"
    files = plan("files", config={"sandbox": {"network": [], "fs": {"read": ["/srv/data"], "write": ["${OUT:-out}"]}}})
    assert check({**ALL, "fs_read": [], "fs_write": ["/srv/**", "${OUT:-out}"]}, files) is None, "fs_write covers reads"
    assert check({**ALL, "fs_read": ["/etc/*"], "fs_write": ["${OUT:-out}"]}, files) == (
        'fs_read: /srv/data (read by files) is not allowed by ["/etc/*"]'
    )
    assert check({**ALL, "fs_read": ["*"], "fs_write": ["out"]}, files) == (
        'fs_write: ${OUT:-out} (written by files) is not allowed by ["out"]'
    ), "a path is compared as written"
    assert check({k: [] for k in KINDS}, plan("d", "directive", config={"sandbox": {"network": ["x:1"]}})) is None


def test_what_an_mcp_servers_sandbox_reaches_is_checked_for_each_of_its_tools() -> None:
    """An mcp_tool's plan (mcp_tool -> mcp_server -> subprocess) holds the sandbox of the server
    process that runs the call: under a context its hosts and paths are checked as a tool's are,
    after mcp, and sent to public.admit_call as needs; a remote server's plan has no sandbox."""
    chain = [{"tool_id": "filesystem_mcp.read_file"}, {"tool_id": "filesystem_mcp", "tool_type": "mcp_server"}]
    sandbox = {"network": ["registry.npmjs.org:443"], "fs": {"read": [], "write": ["${KIWI_FILESYSTEM_ROOT:-.}"]}}
    server = plan(
        "filesystem_mcp.read_file",
        "mcp_tool",
        chain=chain,
        config={"tool": "read_file", "command": "npx", "sandbox": sandbox},
    )
    assert needs(server) == {
        "mcp": ["filesystem_mcp.read_file"],
        "net": ["registry.npmjs.org:443"],
        "fs_write": ["${KIWI_FILESYSTEM_ROOT:-.}"],
    }
    covering = {**ALL, "shell": [], "tools": [], "mcp": ["filesystem_mcp.*"], "net": ["registry.npmjs.org:443"]}
    assert check({**covering, "fs_read": [], "fs_write": ["tools/**", "${KIWI_FILESYSTEM_ROOT:-.}"]}, server) is None
    assert check({**covering, "net": []}, server) == (
        "net: registry.npmjs.org:443 (reached by filesystem_mcp.read_file) is not allowed by []"
    )
    assert check({k: v for k, v in covering.items() if k != "net"}, server) == (
        "net: registry.npmjs.org:443 (reached by filesystem_mcp.read_file) is not allowed by []"
    ), "a context without net reaches no host"
    assert check({**covering, "fs_write": ["tools/**"]}, server) == (
        'fs_write: ${KIWI_FILESYSTEM_ROOT:-.} (written by filesystem_mcp.read_file) is not allowed by ["tools/**"]'
    ), "a path is compared as written"
    assert check({**covering, "mcp": ["github_mcp.*"], "net": []}, server) == (
        'mcp: filesystem_mcp.read_file is not allowed by ["github_mcp.*"]'
    ), "mcp is checked first"
    remote = plan(
        "github_mcp.get_me",
        "mcp_tool",
        primitive="http_client",
        chain=[{"tool_id": "github_mcp.get_me"}, {"tool_id": "github_mcp", "tool_type": "mcp_server"}],
        config={"tool": "get_me", "url": "https://api.githubcopilot.com/mcp/"},
    )
    assert needs(remote) == {"mcp": ["github_mcp.get_me"]}
    assert check({k: [] for k in KINDS} | {"mcp": ["github_mcp.*"]}, remote) is None, (
        "a remote server: nothing to check"
    )


async def test_a_tool_whose_sandbox_reaches_a_host_outside_net_is_refused_under_a_directive(
    database_url: str, conn: psycopg.Connection, tmp_path: Path, publish_tool: Callable[..., str], session: str
) -> None:
    """At run time, whether the gate holds the context (the directive was run here) or reads it
    with public.admit_call (another runner): the host is named either way."""
    fetch = publish_tool(
        "perm_fetch",
        {"tool_type": "script", "executor": "bash_runtime", "config": {"sandbox": {"network": ["127.0.0.1:8080"]}}},
        {"f.sh": "echo fetched\n"},
        entrypoint="f.sh",
    )
    closed = directive(publish_tool, {"tools": [fetch]})  # it may run fetch, but reach no host
    opened = directive(publish_tool, {"tools": [fetch], "net": ["127.0.0.1:*"]})
    lacking = f"net: 127.0.0.1:8080 (reached by {fetch}) is not allowed by []"
    call = {"action": "dry_run", "item_id": fetch, "parameters": {}}
    async with kiwi(database_url, tmp_path, session) as client:
        started = await client.call_tool("execute", {"action": "run", "item_id": closed})
        assert not started.is_error, text_of(started)
        closed_ctx = (started.structured_content or {})["context"]["id"]
        held = await client.call_tool("execute", {**call, "context": closed_ctx})
        started = await client.call_tool("execute", {"action": "run", "item_id": opened})
        allowed = await client.call_tool(
            "execute", {**call, "context": (started.structured_content or {})["context"]["id"]}
        )
    async with kiwi(database_url, tmp_path, session) as other:
        read = await other.call_tool("execute", {**call, "context": closed_ctx})
    assert held.is_error and (held.structured_content or {})["permission"] == lacking
    assert lacking in text_of(held)
    assert read.is_error and (read.structured_content or {})["permission"] == lacking, "admit_call refuses it too"
    assert not allowed.is_error, text_of(allowed)
    refusals = [r for r in audit_rows(conn, session) if r["decision"] == "refused"]
    assert [r["reason"] for r in refusals] == [f"permission {lacking}"] * 2


async def test_an_mcp_tool_whose_server_reaches_a_host_outside_net_is_refused_under_a_directive(
    database_url: str, conn: psycopg.Connection, tmp_path: Path, publish_tool: Callable[..., str], session: str
) -> None:
    """A call to an MCP server's tool runs in the server's sandbox: under a directive whose net
    does not cover its host it is refused, whether the gate holds the context or public.admit_call
    reads it; one whose net covers it is admitted. Nothing starts the server (dry runs)."""
    server = publish_tool(
        "perm_srv",
        {
            "tool_type": "mcp_server",
            "executor": "subprocess",
            "config": {"transport": "stdio", "command": "true", "sandbox": {"network": ["127.0.0.1:8080"]}},
        },
    )
    tool = publish_tool(f"{server}.echo", {"tool_type": "mcp_tool", "executor": server, "config": {"tool": "echo"}})
    closed = directive(publish_tool, {"mcp": [f"{server}.*"]})  # its tools, but no host (it requires none)
    opened = directive(publish_tool, {"mcp": [f"{server}.*"], "net": ["127.0.0.1:*"]})
    lacking = f"net: 127.0.0.1:8080 (reached by {tool}) is not allowed by []"
    call = {"action": "dry_run", "item_id": tool, "parameters": {}}
    async with kiwi(database_url, tmp_path, session) as client:
        started = await client.call_tool("execute", {"action": "run", "item_id": closed})
        assert not started.is_error, text_of(started)
        closed_ctx = (started.structured_content or {})["context"]["id"]
        held = await client.call_tool("execute", {**call, "context": closed_ctx})
        started = await client.call_tool("execute", {"action": "run", "item_id": opened})
        allowed = await client.call_tool(
            "execute", {**call, "context": (started.structured_content or {})["context"]["id"]}
        )
    async with kiwi(database_url, tmp_path, session) as other:
        read = await other.call_tool("execute", {**call, "context": closed_ctx})
    assert held.is_error and (held.structured_content or {})["permission"] == lacking, text_of(held)
    assert read.is_error and (read.structured_content or {})["permission"] == lacking, "admit_call refuses it too"
    assert not allowed.is_error, text_of(allowed)
    refusals = [r for r in audit_rows(conn, session) if r["decision"] == "refused"]
    assert [r["reason"] for r in refusals] == [f"permission {lacking}"] * 2


def test_globs_cover_patterns_as_the_database_does() -> None:
    assert covers("tools/**", "tools/x/*") and covers("*", "**") and covers("a*", "a?b")
    assert not covers("tools/**", "**") and not covers("a?", "a*") and not covers("a.b", "axb")
    assert covers("[x]", "[x]") and not covers("[x]", "x"), "no sets: [ is literal"


def test_declared_path_parameters_are_checked_against_the_fs_globs() -> None:
    plan = {
        "tool_id": "files.write_file",
        "tool_type": "script",
        "primitive": "subprocess",
        "config": {"fs": {"read": ["source"], "write": ["path", "targets"]}},
    }
    allowed = {"tools": ["*"], "fs_read": ["src/*"], "fs_write": ["tools/*"]}
    assert check(allowed, plan, {"path": "tools/a.py", "source": "src/x", "targets": ["tools/b"]}) is None
    assert check(allowed, plan, {"path": "tools/../etc/passwd"}) == (
        'fs_write: etc/passwd (parameter path) is not allowed by ["tools/*"]'
    ), "paths are normalised before matching: .. cannot climb out"
    assert check(allowed, plan, {"targets": ["tools/b", "README.md"]}).startswith("fs_write: README.md")
    assert check(allowed, plan, {"source": "secrets/key"}).startswith("fs_read: secrets/key")
    assert check(allowed, plan, {"content": "anything"}) is None, "undeclared parameters are not paths"
    assert check(allowed, {**plan, "config": {}}, {"path": "/etc/passwd"}) is None, "a tool without fs declares none"
    assert check({"tools": ["*"], "fs_write": ["public/*"]}, plan, {"path": "public/x"}) is None


def test_a_filesystem_server_call_is_checked_by_the_paths_its_server_declares(conn: psycopg.Connection) -> None:
    """Issue 12: fs_read/fs_write held for scripts only. The seeded filesystem server says which
    parameter of each of its tools is a path (config.tool_fs), and an imported tool's merged
    config carries it with the upstream tool's name, so its calls are checked too."""
    (server_config,) = conn.execute(
        "select manifest -> 'config' from tool_versions v join tools t on t.id = v.tool_uuid"
        " where t.ref = 'filesystem_mcp' and v.is_latest"
    ).fetchone()
    chain = [
        {"tool_id": "filesystem_mcp.read_file", "tool_type": "mcp_tool"},
        {"tool_id": "filesystem_mcp", "tool_type": "mcp_server"},
    ]
    # and what the server's sandbox reaches, as the seeded create_script_tool permits it
    allowed = {
        "mcp": ["filesystem_mcp.*"],
        "fs_read": ["docs/*"],
        "fs_write": ["out/*", "${KIWI_FILESYSTEM_ROOT:-.}"],
        "net": ["registry.npmjs.org:443"],
    }

    def call(tool: str, params: dict[str, Any]) -> str | None:
        plan = {
            "tool_id": f"filesystem_mcp.{tool}",
            "tool_type": "mcp_tool",
            "chain": chain,
            "config": {**server_config, "tool": tool},
        }
        return check(allowed, plan, params)

    assert call("read_file", {"path": "docs/a.md"}) is None
    assert call("read_file", {"path": "docs/../.env"}) == 'fs_read: .env (parameter path) is not allowed by ["docs/*"]'
    assert call("read_multiple_files", {"paths": ["docs/a", "/etc/shadow"]}).startswith("fs_read: /etc/shadow")
    assert call("write_file", {"path": "docs/a.md", "content": "x"}).startswith("fs_write: docs/a.md")
    assert call("write_file", {"path": "out/a.md", "content": "x"}) is None
    assert call("move_file", {"source": "docs/a.md", "destination": "out/a.md"}).startswith("fs_write: docs/a.md")
    assert call("list_allowed_directories", {}) is None, "a tool that names no path needs no fs permission"


async def test_a_path_outside_the_fs_write_globs_is_refused_through_the_server(
    database_url: str, conn: psycopg.Connection, tmp_path: Path, publish_tool: Callable[..., str], session: str
) -> None:
    writer = publish_tool(
        "perm_writer",
        {
            "tool_type": "script",
            "executor": "bash_runtime",
            "parameters": [{"name": "path", "type": "string", "required": True}],
            "config": {"fs": {"write": ["path"]}},
        },
        {"w.sh": 'echo "would write $KIWI_PARAM_PATH"\n'},
        entrypoint="w.sh",
    )
    d = directive(publish_tool, {"tools": [writer], "fs_write": ["tools/*"]})
    async with kiwi(database_url, tmp_path, session) as client:
        started = await client.call_tool("execute", {"action": "run", "item_id": d})
        ctx = (started.structured_content or {})["context"]["id"]
        inside = await client.call_tool(
            "execute", {"action": "run", "item_id": writer, "parameters": {"path": "tools/x.py"}, "context": ctx}
        )
        outside = await client.call_tool(
            "execute",
            {"action": "run", "item_id": writer, "parameters": {"path": "tools/../.env"}, "context": ctx},
        )
    assert not inside.is_error, text_of(inside)
    assert outside.is_error
    assert 'fs_write: .env (parameter path) is not allowed by ["tools/*"]' in text_of(outside)
    assert audit_rows(conn, session)[-1]["decision"] == "refused"
