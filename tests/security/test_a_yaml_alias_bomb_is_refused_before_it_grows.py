"""Finding: a 1 KB YAML alias bomb sent as a manifest to MCP `execute publish` became 74 MB of
JSON before any size check (aliases share one node after parsing; json.dumps walks the tree).
And PyYAML's C composer recurses on nesting: 200,000 `[` in a local tool.yaml crashed the
process outright.

Every place the runner parses tenant YAML now goes through runner/core/yaml_safe.py: the input
capped in size, its nesting counted on the scanner's tokens, its expanded size counted over the
shared nodes (no recursion, early exit) before anything is constructed, each with an error
naming the limit. Anchors and aliases in an ordinary manifest keep working.
"""

from __future__ import annotations

import subprocess
import sys
import uuid
from collections.abc import Iterator
from pathlib import Path

import psycopg
import pytest
from mcp import Client
from mcp.server.mcpserver import MCPServer

from runner import Runner, build_server
from tests.conftest import ROOT
from tests.kiwi_cli import kiwi_env, run_kiwi


def bomb(tool_id: str, levels: int = 6) -> str:
    """9**levels copies of "lol" in a few hundred bytes."""
    lines = [f"tool_id: {tool_id}", "tool_type: script", "executor: bash_runtime", "version: 1.0.0"]
    lines.append('l0: &l0 ["lol", "lol", "lol", "lol", "lol", "lol", "lol", "lol", "lol"]')
    lines += [f"l{i}: &l{i} [{', '.join([f'*l{i - 1}'] * 9)}]" for i in range(1, levels + 1)]
    return "\n".join(lines) + "\n"


def text(result: object) -> str:
    return "\n".join(getattr(block, "text", "") for block in getattr(result, "content", []))


@pytest.fixture
async def server(runner: Runner) -> MCPServer:
    """Kiwi's MCP server as the local owner (who may publish under local/)."""
    return build_server(runner)


@pytest.fixture
def tool_ids(conn: psycopg.Connection) -> Iterator[list[str]]:
    made: list[str] = []
    yield made
    for tool_id in made:
        conn.execute("delete from tools where ref = %s", (tool_id,))


async def test_mcp_publish_refuses_an_alias_bomb_naming_the_limit(server: MCPServer, tool_ids: list[str]) -> None:
    tool_id = f"local/bomb_{uuid.uuid4().hex[:8]}"
    tool_ids.append(tool_id)
    async with Client(server) as client:
        refused = await client.call_tool("execute", {"action": "publish", "manifest": bomb(tool_id)})
        assert refused.is_error and "manifest: " in text(refused) and "MAX_YAML_EXPANDED" in text(refused)
        deep = f"tool_id: {tool_id}\nnested: " + "[" * 100_000
        refused = await client.call_tool("execute", {"action": "publish", "manifest": deep})
        assert refused.is_error and "nests deeper than 64 levels" in text(refused), text(refused)
        looped = f"tool_id: {tool_id}\nloop: &x [1, *x]\n"
        refused = await client.call_tool("execute", {"action": "publish", "manifest": looped})
        assert refused.is_error and "contains itself" in text(refused), text(refused)
        assert "Traceback" not in text(refused)


async def test_anchors_and_aliases_in_an_ordinary_manifest_still_publish(
    server: MCPServer, tool_ids: list[str]
) -> None:
    tool_id = f"local/aliases_{uuid.uuid4().hex[:8]}"
    tool_ids.append(tool_id)
    manifest = (
        f"tool_id: {tool_id}\ntool_type: script\nexecutor: bash_runtime\nversion: 1.0.0\nentrypoint: main.sh\n"
        "parameters:\n  type: object\n  properties:\n    a: &text {type: string}\n    b: *text\n"
    )
    files = [{"path": "main.sh", "content_text": 'echo "$KIWI_PARAM_A$KIWI_PARAM_B"\n', "is_entrypoint": True}]
    async with Client(server) as client:
        published = await client.call_tool("execute", {"action": "publish", "manifest": manifest, "files": files})
        assert not published.is_error, text(published)
        ran = await client.call_tool("execute", {"action": "run", "item_id": tool_id, "parameters": {"b": 5}})
        assert ran.is_error and "b: must be of type string" in text(ran)


def test_kiwi_publish_of_a_bomb_directory_is_a_usage_error(database_url: str, tmp_path: Path) -> None:
    folder = tmp_path / "bomb"
    folder.mkdir()
    (folder / "tool.yaml").write_text(bomb(f"bomb_{uuid.uuid4().hex[:8]}"))
    done = run_kiwi(["publish", str(folder)], cwd=tmp_path, env=kiwi_env(database_url, tmp_path / "cache"))
    assert done.code == 2 and "MAX_YAML_EXPANDED" in done.err and "Traceback" not in done.err, done.err


def test_a_deeply_nested_local_tool_yaml_is_skipped_not_a_crash() -> None:
    """The local spaces read every tool.yaml they find (with PyYAML's C loader, which recursed
    in C): a crash here took the whole process with it."""
    code = (
        "from runner.registry.spaces import _parse_identity\n"
        "print(_parse_identity(b'tool_id: x\\nn: ' + b'[' * 200000)[1])\n"
    )
    done = subprocess.run([sys.executable, "-c", code], cwd=ROOT, capture_output=True, text=True, timeout=120)
    assert done.returncode == 0 and "nests deeper than 64 levels" in done.stdout, (done.returncode, done.stderr)
