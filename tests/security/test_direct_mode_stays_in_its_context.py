"""Direct mode (`kiwi serve --directive REF`) cannot call a tool outside the directive's context.

A server started for a directive offers only the tools the directive declares. Here its
permissions would allow every tool (`tools: ["*"]`), so the only thing between a client and
any other tool is direct mode itself: a name that is not one of the listed tools (another
tool, the same tool spelled another way, the directive, the meta-tools) must be an unknown
tool, and nothing may run. Each tool appends to a marker file when it runs, so a run that
slipped through would show there; the server is real (in memory and a real HTTP process),
so is the database.
"""

from __future__ import annotations

import uuid
from collections.abc import Callable, Iterator
from pathlib import Path

import psycopg
import pytest
from mcp import Client
from mcp.shared.exceptions import MCPError

from runner import Runner, standard_dispatcher
from runner.mcp_server.direct import build_direct_server
from runner.testing.http_serving import kiwi_http_server, mcp_client, user_token

MARKER_SCRIPT = 'printf x >>"$KIWI_PARAM_MARKER"\necho \'{"ran": true}\'\n'


@pytest.fixture
async def runner(make_runner: Callable[..., Runner]) -> Runner:
    return make_runner(dispatcher=standard_dispatcher())


@pytest.fixture
def marks(tmp_path: Path) -> Path:
    """Where the markers go: a directory the sandbox's user (nobody) may write."""
    path = tmp_path / "marks"
    path.mkdir()
    path.chmod(0o777)
    return path


@pytest.fixture
def tools(publish_tool: Callable[..., str], conn: psycopg.Connection, marks: Path) -> Iterator[dict[str, str]]:
    def marked(stem: str) -> str:
        return publish_tool(
            stem,
            {
                "tool_type": "script",
                "executor": "bash_runtime",
                "description": "counts its runs in its marker file",
                "parameters": [{"name": "marker", "type": "string", "required": True}],
                # its sandbox may write the markers (publish_tool publishes as an admin, who may grant)
                "config": {"sandbox": {"fs": {"write": [str(marks)]}}},
            },
            {"run.sh": MARKER_SCRIPT},
            entrypoint="run.sh",
        )

    inside, outside = marked("direct_inside"), marked("direct_outside")
    directive = publish_tool(
        "direct_wide",
        {
            "tool_type": "directive",
            "executor": "directive_runtime",
            "requires": {"tools": [inside]},
            "permissions": {"tools": ["*"], "shell": ["*"], "fs_read": ["*"], "fs_write": ["*"], "mcp": ["*.*"]},
        },
        {"d.md": "Use the inside tool only."},
        entrypoint="d.md",
    )
    yield {"inside": inside, "outside": outside, "directive": directive}
    conn.execute("delete from audit_log where tool_id = any(%s)", ([inside, outside, directive],))


def names_outside(tools: dict[str, str]) -> list[str]:
    inside, outside = tools["inside"], tools["outside"]
    return [
        outside,
        f"public/{outside}",
        f"{outside}@1.0.0",
        f"public/{inside}",  # the listed tool, spelled as a reference: not a listed name
        f"{inside}@1.0.0",
        f" {inside}",
        inside.upper(),
        tools["directive"],
        "hello_world",
        "execute",
        "search",
        "load",
        "help",
        "",
    ]


async def test_only_the_declared_tools_can_be_called_in_memory(
    runner: Runner, tools: dict[str, str], marks: Path, conn: psycopg.Connection
) -> None:
    marker = marks / f"marker-{uuid.uuid4().hex}"
    server = await build_direct_server(runner, tools["directive"])
    try:
        async with Client(server) as client:
            assert [t.name for t in (await client.list_tools()).tools] == [tools["inside"]]
            for name in names_outside(tools):
                with pytest.raises(MCPError) as raised:
                    await client.call_tool(name, {"marker": str(marker)})
                assert raised.value.code == -32602, name
                assert not marker.exists(), f"{name!r} ran"
            ran = await client.call_tool(tools["inside"], {"marker": str(marker)})
        assert not ran.is_error and marker.read_text() == "x"  # the marker does count runs
        await runner.flush_records()
        called = conn.execute(
            "select tool_id from audit_log where session_id = %s and action = 'run'", (server.server_session,)
        ).fetchall()
        assert [r[0] for r in called] == [tools["inside"]]
    finally:
        conn.execute("delete from audit_log where session_id = %s", (server.server_session,))


async def test_only_the_declared_tools_can_be_called_over_http(
    database_url: str, tools: dict[str, str], tmp_path: Path, marks: Path, conn: psycopg.Connection
) -> None:
    marker = marks / f"marker-{uuid.uuid4().hex}"
    with kiwi_http_server(database_url, tmp_path / "serve", "--directive", tools["directive"]) as served:
        async with mcp_client(served.url, user_token()) as client:
            assert [t.name for t in (await client.list_tools()).tools] == [tools["inside"]]
            for name in (tools["outside"], f"public/{tools['outside']}", "execute"):
                with pytest.raises(MCPError) as raised:
                    await client.call_tool(name, {"marker": str(marker)})
                assert raised.value.code == -32602, name
    assert not marker.exists()
    ran = conn.execute("select count(*) from audit_log where tool_id = %s", (tools["outside"],)).fetchone()
    assert ran is not None and ran[0] == 0
