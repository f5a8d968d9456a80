"""What the checkpoint tests share: a real git working tree in a temporary folder, a tool that
changes it (config.mutates_state), a directive that allows that tool on that tree, and Kiwi's
MCP server on a runner whose working tree it is (KIWI_WORKTREE)."""

from __future__ import annotations

import os
import shutil
import subprocess
import tempfile
from collections.abc import AsyncIterator, Callable, Iterator
from contextlib import asynccontextmanager, contextmanager
from pathlib import Path
from typing import Any

from mcp import Client
from mcp_types import CallToolResult

from runner import PostgresRegistry, Principal, Runner, build_server, local_owner, standard_dispatcher
from tests.conftest import local_settings

NOBODY = 65534  # as root, the sandbox writes as nobody: the tree must be nobody's to change

SCRIBBLE = """#!/usr/bin/env bash
# Changes the working tree it is given: one file edited, one removed, one made.
set -euo pipefail
cd "$KIWI_PARAM_DIR"
echo two > a.txt
rm b.txt
echo new > n.txt
echo '{"changed": 3}'
"""


def git(tree: Path, *args: str) -> str:
    done = subprocess.run(
        ["git", "-c", "safe.directory=*", "-c", "user.name=t", "-c", "user.email=t@t", "-C", str(tree), *args],
        capture_output=True,
        text=True,
        check=True,
    )
    return done.stdout.strip()


def files_of(tree: Path) -> dict[str, str]:
    """Every file of the tree but git's own, with its text."""
    return {p.name: p.read_text() for p in sorted(tree.iterdir()) if p.is_file()}


@contextmanager
def git_worktree() -> Iterator[Path]:
    """A git working tree with a commit, a staged file and an untracked one, in a folder the
    sandbox's user can reach (pytest's tmp_path sits under a folder only root may enter)."""
    folder = Path(tempfile.mkdtemp(prefix="kiwi-checkpoint-"))
    folder.chmod(0o755)
    tree = folder / "project"
    tree.mkdir()
    git(tree, "init", "-q")
    (tree / "a.txt").write_text("one\n")
    (tree / "b.txt").write_text("keep\n")
    git(tree, "add", ".")
    git(tree, "commit", "-qm", "start")
    (tree / "s.txt").write_text("staged\n")
    git(tree, "add", "s.txt")
    (tree / "u.txt").write_text("untracked\n")
    if os.geteuid() == 0:
        for path in [tree, *tree.rglob("*")]:
            os.lchown(path, NOBODY, NOBODY)
    try:
        yield tree
    finally:
        shutil.rmtree(folder, ignore_errors=True)


BEFORE = {"a.txt": "one\n", "b.txt": "keep\n", "s.txt": "staged\n", "u.txt": "untracked\n"}
AFTER = {"a.txt": "two\n", "n.txt": "new\n", "s.txt": "staged\n", "u.txt": "untracked\n"}


def scribble_and_directive(publish_tool: Callable[..., str], tree: Path) -> tuple[str, str]:
    """A tool that changes `tree` and says so (mutates_state), and a directive allowing it there."""
    tool = publish_tool(
        "scribble",
        {
            "tool_type": "script",
            "executor": "bash_runtime",
            "parameters": [{"name": "dir", "type": "string", "required": True}],
            "config": {
                "mutates_state": True,
                "fs": {"write": ["dir"]},
                "sandbox": {"fs": {"write": [str(tree)]}},
            },
        },
        {"scribble.sh": SCRIBBLE},
        entrypoint="scribble.sh",
    )
    directive = publish_tool(
        "tidy",
        {
            "tool_type": "directive",
            "executor": "directive_runtime",
            "requires": {"tools": [tool]},
            "permissions": {"tools": [tool], "fs_write": [str(tree), f"{tree}/**"]},
        },
        {"tidy.md": "# Tidy the project\n"},
        entrypoint="tidy.md",
    )
    return tool, directive


@asynccontextmanager
async def kiwi_mcp(
    database_url: str, cache_dir: Path, tree: Path, principal: Principal | None = None
) -> AsyncIterator[Client]:
    """Kiwi's MCP server, as `principal` (the local owner), its working tree `tree`."""
    settings = local_settings(database_url, cache_dir)
    registry = PostgresRegistry(database_url, principal=principal or local_owner())
    environ = {**os.environ, "KIWI_WORKTREE": str(tree)}
    runner = Runner(registry, settings, dispatcher=standard_dispatcher(), environ=environ)
    try:
        async with Client(build_server(runner)) as client:
            yield client
        await runner.flush_records()
    finally:
        await runner.aclose()


def text_of(result: CallToolResult) -> str:
    return "\n".join(getattr(block, "text", "") for block in result.content)


async def run_in_directive(client: Client, tool: str, directive: str, tree: Path) -> dict[str, Any]:
    """Run the directive, then the tool in its context: the tool's structured answer."""
    started = await client.call_tool("execute", {"action": "run", "item_id": directive})
    assert not started.is_error, text_of(started)
    context = (started.structured_content or {})["context"]["id"]
    ran = await client.call_tool(
        "execute", {"action": "run", "item_id": tool, "parameters": {"dir": str(tree)}, "context": context}
    )
    assert not ran.is_error, text_of(ran)
    return {**(ran.structured_content or {}), "context_id": context, "text": text_of(ran)}
