"""A NUL or a lone surrogate in what is published is refused naming the field.

PostgreSQL text and jsonb cannot hold NUL (and JSON cannot carry a lone surrogate as UTF-8):
such a manifest or file reached the database and came back as a raw error naming no field.
The runner's one publish path (Registry.publish, and request_publish_approval and
preview_plan beside it), which `kiwi publish` and MCP `execute publish` both take, now refuses
it before sending, naming each place: `manifest.description`, `files[1].content_text`, ...
(`kiwi publish` of a directory already refused such text as it read it; its test guards that
it still says so, without a traceback.)
"""

from __future__ import annotations

import uuid
from pathlib import Path

import pytest
from mcp import Client
from mcp.server.mcpserver import MCPServer

from runner import PostgresRegistry, Runner, UsageError, build_server, local_owner
from tests.kiwi_cli import kiwi_env, run_kiwi


def text(result: object) -> str:
    return "\n".join(getattr(block, "text", "") for block in getattr(result, "content", []))


@pytest.fixture
async def server(runner: Runner) -> MCPServer:
    """Kiwi's MCP server as the local owner (who may publish under local/)."""
    return build_server(runner)


def _manifest(**fields: object) -> dict[str, object]:
    return {
        "tool_id": f"local/nul_{uuid.uuid4().hex[:8]}",
        "tool_type": "script",
        "executor": "bash_runtime",
        "version": "1.0.0",
        **fields,
    }


@pytest.mark.parametrize(
    ("manifest", "files", "wanted"),
    [
        (_manifest(description="a\x00b"), [], "manifest.description: must not contain NUL"),
        (
            _manifest(tags=["ok", "\ud800"]),
            [],
            "manifest.tags[2]: must be valid Unicode text (it holds a lone surrogate)",
        ),
        (_manifest(config={"env": {"X\x00": "1"}}), [], "manifest.config.env: a key must not contain NUL"),
        (_manifest(), [{"path": "run.sh", "content_text": "echo \x00"}], "files[1].content_text: must not contain NUL"),
        (_manifest(), [{"path": "r\udc80.sh", "content_text": "x"}], "files[1].path: must be valid Unicode text"),
    ],
)
async def test_the_registry_client_names_the_field(
    database_url: str, manifest: dict[str, object], files: list[dict[str, object]], wanted: str
) -> None:
    async with PostgresRegistry(database_url, principal=local_owner()) as registry:
        for send in (
            lambda: registry.publish(manifest, files or [{"path": "run.sh", "content_text": "x"}]),
            lambda: registry.preview_plan(manifest, files),
            lambda: registry.request_publish_approval(manifest, files),
        ):
            with pytest.raises(UsageError) as raised:
                await send()
            assert wanted in raised.value.message
            assert raised.value.message.startswith("invalid manifest:")


async def test_mcp_publish_names_the_field(server: MCPServer) -> None:
    manifest = _manifest(description="before\x00after")
    async with Client(server) as client:
        refused = await client.call_tool(
            "execute", {"action": "publish", "manifest": manifest, "files": [{"path": "run.sh", "content_text": "x"}]}
        )
    assert refused.is_error
    assert "manifest.description: must not contain NUL" in text(refused), text(refused)
    assert "Traceback" not in text(refused) and "unsupported Unicode" not in text(refused)


def test_kiwi_publish_names_the_file(database_url: str, tmp_path: Path) -> None:
    folder = tmp_path / "tool"
    folder.mkdir()
    tool_id = f"nul_{uuid.uuid4().hex[:8]}"
    (folder / "tool.yaml").write_text(
        f"tool_id: {tool_id}\ntool_type: script\nexecutor: bash_runtime\nversion: 1.0.0\n"
    )
    (folder / "run.sh").write_text("echo hi\x00\n")
    done = run_kiwi(["publish", str(folder)], cwd=tmp_path, env=kiwi_env(database_url, tmp_path / "cache"))
    assert done.code == 2, done.err
    assert "run.sh" in done.err and "NUL" in done.err, done.err
    assert "Traceback" not in done.err
