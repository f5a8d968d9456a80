"""Directives end to end (real database, Runner): instructions, inputs, and a tool context of
exactly the declared tools with their availability; malformed directives refused at publish."""

from __future__ import annotations

import uuid
from collections.abc import Callable, Iterator
from typing import Any

import psycopg
import pytest
from psycopg.types.json import Jsonb

from runner import PostgresRegistry, Runner, UsageError, local_owner, standard_dispatcher

INSTRUCTIONS = "# Do the thing\n\nUse the tools below.\n"


@pytest.fixture
async def runner(make_runner: Callable[..., Runner]) -> Runner:
    return make_runner(dispatcher=standard_dispatcher())


@pytest.fixture
def directive(publish_tool: Callable[..., str]) -> Callable[..., str]:
    """Publish a throwaway directive with the given declarations; returns its id."""

    def publish(**declarations: Any) -> str:
        manifest = {
            "tool_type": "directive",
            "executor": "directive_runtime",
            "parameters": [{"name": "topic", "type": "string", "required": True}],
            # what it declares must be covered by its permissions (refused at publish otherwise)
            "permissions": {"tools": ["*"], "mcp": ["*.*"]},
            **declarations,
        }
        return publish_tool("directive", manifest, {"directive.md": INSTRUCTIONS}, entrypoint="directive.md")

    return publish


@pytest.fixture
def mcp_server(conn: psycopg.Connection) -> Iterator[Callable[[list[str]], str]]:
    """A throwaway MCP server with some tools imported as `<server>.<tool>` (never started)."""
    made: list[str] = []

    def publish(tools: list[str]) -> str:
        server = f"dirtest_mcp_{uuid.uuid4().hex[:8]}"
        rows: list[dict[str, Any]] = [
            {
                "tool_id": server,
                "tool_type": "mcp_server",
                "executor": "subprocess",
                "version": "1.0.0",
                "config": {"transport": "stdio", "command": "true"},
            }
        ]
        rows += [
            {
                "tool_id": f"{server}.{name}",
                "tool_type": "mcp_tool",
                "executor": server,
                "version": "1.0.0",
                "description": f"the {name} tool",
                "config": {"tool": name},
                "parameters": {"type": "object", "properties": {"q": {"type": "string"}}, "required": ["q"]},
            }
            for name in tools
        ]
        for manifest in rows:
            conn.execute("select publish_tool_version(%s, '[]')", (Jsonb(manifest),))
            made.append(manifest["tool_id"])
        return server

    yield publish
    for tool_id in reversed(made):
        conn.execute("delete from tools where ref = %s", (tool_id,))


def by_id(result_output: dict[str, Any]) -> dict[str, dict[str, Any]]:
    return {t["id"]: t for t in result_output["tools"]}


async def test_the_seeded_directive_returns_instructions_inputs_and_its_tools(runner: Runner) -> None:
    result = await runner.run("create_script_tool", {"purpose": "count lines"})
    assert result.status == "success", result.error
    out = result.output
    assert out["directive"]["tool_id"] == "create_script_tool"
    assert out["directive"]["instructions"].startswith("# Create a script tool")
    assert out["inputs"] == {"purpose": "count lines", "language": "python"}
    assert result.executor_chain == ["create_script_tool", "directive_runtime", "subprocess"]
    tools = by_id(out)
    # exactly the declared tools
    assert set(tools) == {
        "python_runtime",
        "bash_runtime",
        "node_runtime",
        "filesystem_mcp.read_file",
        "filesystem_mcp.write_file",
    }
    python = tools["python_runtime"]
    assert python["available"] and python["required"] and python["kind"] == "tool"
    assert python["version"] == "1.0.0" and python["description"]
    assert python["parameters"]["type"] == "object"
    # the seed imports no MCP tools: optional, so warnings with the import hint
    read = tools["filesystem_mcp.read_file"]
    assert read["kind"] == "mcp_tool" and not read["available"] and not read["required"]
    assert read["hint"] == "kiwi mcp import filesystem_mcp"
    assert any("filesystem_mcp.read_file" in w for w in out["warnings"])
    assert result.detail["warnings"] == out["warnings"]
    # what the filesystem server's sandbox reaches (its seed), as publish requires
    assert out["permissions"]["fs_write"] == ["tools/**", "${KIWI_FILESYSTEM_ROOT:-.}"]
    assert out["permissions"]["net"] == ["registry.npmjs.org:443"]
    assert set(out["permissions"]) == {"fs_read", "fs_write", "shell", "mcp", "tools", "net"}
    assert out["directive"]["cites"] == [
        {
            "id": "kiwi_tool_authoring",
            "available": True,
            "version": "1.0.0",
            "name": "Writing a Kiwi tool",
            "description": out["directive"]["cites"][0]["description"],
        }
    ]
    assert "content" not in out["directive"]["cites"][0]


async def test_the_inputs_are_validated_like_any_tool(runner: Runner) -> None:
    result = await runner.run("create_script_tool", {"language": "cobol"})
    assert result.status == "error"
    assert "purpose" in (result.error or "")


async def test_a_missing_required_tool_is_an_error_with_a_hint(runner: Runner, directive: Callable[..., str]) -> None:
    tool_id = directive(requires={"tools": ["bash_runtime", {"id": "no_such_tool_xyz"}]})
    result = await runner.run(tool_id, {"topic": "t"})
    assert result.status == "error"
    assert "requires no_such_tool_xyz" in (result.error or "")
    assert 'tool "no_such_tool_xyz" not found' in (result.error or "")
    assert result.detail["missing"] == ["no_such_tool_xyz"]
    assert "publish no_such_tool_xyz" in result.detail["hint"]
    # the context is still there, for the agent to see what is and is not
    tools = by_id(result.output)
    assert tools["bash_runtime"]["available"] and not tools["no_such_tool_xyz"]["available"]


async def test_a_missing_optional_tool_is_a_warning(runner: Runner, directive: Callable[..., str]) -> None:
    tool_id = directive(requires={"tools": [{"id": "no_such_tool_xyz", "required": False}]}, cites=["nope_kb"])
    result = await runner.run(tool_id, {"topic": "t"})
    assert result.status == "success", result.error
    assert result.output["directive"]["instructions"] == INSTRUCTIONS
    assert result.output["inputs"] == {"topic": "t"}
    warnings = result.output["warnings"]
    assert any(w.startswith("optional tool no_such_tool_xyz") for w in warnings)
    assert any(w.startswith("cited knowledge nope_kb") for w in warnings)
    assert result.detail["warnings"] == warnings


async def test_a_pinned_version_is_looked_up(runner: Runner, directive: Callable[..., str]) -> None:
    tool_id = directive(
        requires={"tools": [{"id": "bash_runtime", "version": "1.0.0"}, {"id": "python_runtime", "version": "9.9.9"}]}
    )
    result = await runner.run(tool_id, {"topic": "t"})
    assert result.status == "error"
    tools = by_id(result.output)
    assert tools["bash_runtime"]["available"] and tools["bash_runtime"]["version"] == "1.0.0"
    assert not tools["python_runtime"]["available"]
    assert "version 9.9.9" in tools["python_runtime"]["reason"]


async def test_an_mcp_requirement_with_no_imported_tools_is_unavailable_with_the_import_hint(
    runner: Runner, directive: Callable[..., str], mcp_server: Callable[[list[str]], str]
) -> None:
    server = mcp_server([])
    tool_id = directive(requires={"mcp": [{"server": server, "tools": ["search"]}]})
    result = await runner.run(tool_id, {"topic": "t"})
    assert result.status == "error"
    entry = by_id(result.output)[f"{server}.search"]
    assert not entry["available"] and entry["kind"] == "mcp_tool"
    assert entry["hint"] == f"kiwi mcp import {server}"
    assert f"kiwi mcp import {server}" in (result.error or "")


async def test_imported_mcp_tools_come_with_their_schemas_and_only_the_declared_ones(
    runner: Runner, directive: Callable[..., str], mcp_server: Callable[[list[str]], str]
) -> None:
    server = mcp_server(["search", "delete_everything"])
    tool_id = directive(
        requires={"mcp": [{"server": server, "tools": ["search"]}]}, permissions={"mcp": [f"{server}.search"]}
    )
    result = await runner.run(tool_id, {"topic": "t"})
    assert result.status == "success", result.error
    tools = by_id(result.output)
    assert list(tools) == [f"{server}.search"]
    entry = tools[f"{server}.search"]
    assert entry["available"] and entry["server"] == server and entry["name"] == "search"
    assert entry["description"] == "the search tool"
    assert entry["parameters"]["required"] == ["q"]
    assert result.output["permissions"]["mcp"] == [f"{server}.search"]


async def test_an_unknown_mcp_server_is_unavailable(runner: Runner, directive: Callable[..., str]) -> None:
    tool_id = directive(requires={"mcp": [{"server": "no_such_mcp", "tools": ["x"], "required": False}]})
    result = await runner.run(tool_id, {"topic": "t"})
    assert result.status == "success"
    entry = by_id(result.output)["no_such_mcp.x"]
    assert not entry["available"] and "not in the registry" in entry["reason"]


@pytest.mark.parametrize(
    ("declarations", "named"),
    [
        ({"requires": {"tools": [{"id": "ok"}, {"id": "a b"}]}}, "requires.tools[2].id: must be a tool reference"),
        ({"requires": {"tools": [], "server": []}}, "requires.server: unknown field"),
        ({"requires": {"mcp": [{"server": "github_mcp"}]}}, "requires.mcp[1].tools: required"),
        ({"permissions": {"fs_write": [3]}}, "permissions.fs_write[1]: must be a glob string"),
        ({"permissions": {"network": []}}, "permissions.network: unknown field"),
        ({"permissions": {"net": ["example.com"]}}, "permissions.net[1]: must be a host:port pattern"),
        ({"permissions": {"mcp": ["nodot"]}}, "permissions.mcp[1]: must be a server.tool pattern"),
        ({"cites": [1]}, "cites[1]: must be a knowledge tool reference"),
    ],
)
async def test_malformed_directives_are_refused_through_the_registry_naming_the_field(
    database_url: str, declarations: dict[str, Any], named: str
) -> None:
    registry = PostgresRegistry(database_url, principal=local_owner())
    manifest = {
        "tool_id": f"bad_directive_{uuid.uuid4().hex[:8]}",
        "tool_type": "directive",
        "executor": "directive_runtime",
        "version": "1.0.0",
        "entrypoint": "d.md",
        **declarations,
    }
    try:
        with pytest.raises(UsageError) as refused:
            await registry.publish(manifest, [{"path": "d.md", "content_text": "# x"}])
    finally:
        await registry.aclose()
    assert named in str(refused.value)


async def test_an_older_version_runs_with_its_own_declarations(
    runner: Runner, directive: Callable[..., str], conn: psycopg.Connection
) -> None:
    """Regression: declarations were read from the latest version, so a pinned older
    version could not run. The plan now carries the version's own manifest."""
    tool_id = directive(requires={"tools": ["bash_runtime"]}, cites=["kiwi_tool_authoring"])
    newer = {
        "tool_id": tool_id,
        "tool_type": "directive",
        "executor": "directive_runtime",
        "version": "2.0.0",
        "entrypoint": "directive.md",
        "parameters": [{"name": "topic", "type": "string", "required": True}],
        "requires": {"tools": ["no_such_tool_for_v2"]},
        "permissions": {"tools": ["*"]},
    }
    files = [{"path": "directive.md", "content_text": "v2", "is_entrypoint": True}]
    conn.execute("select publish_tool_version(%s, %s)", (Jsonb(newer), Jsonb(files)))
    old = await runner.run(tool_id, {"topic": "t"}, version="1.0.0")
    assert old.status == "success", old.error
    assert list(by_id(old.output)) == ["bash_runtime"]
    assert [c["id"] for c in old.output["directive"]["cites"]] == ["kiwi_tool_authoring"]
    latest = await runner.run(tool_id, {"topic": "t"})
    assert latest.status == "error" and "no_such_tool_for_v2" in (latest.error or "")
