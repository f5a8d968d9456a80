"""Checkpoints and rollback: a tool that changes state (config.mutates_state), run inside a
directive, is preceded by a checkpoint of the git working tree (the seeded git_checkpoint tool,
run through the gate and the sandbox), recorded against the run; `kiwi rollback RUN` and MCP
`execute action=rollback` restore it. A real git tree in a temporary folder, Kiwi's MCP server
through the SDK's client, and `kiwi` as a process."""

from __future__ import annotations

from collections.abc import Callable, Iterator
from pathlib import Path

import psycopg
import pytest

from tests.checkpoint_setup import (
    AFTER,
    BEFORE,
    files_of,
    git,
    git_worktree,
    kiwi_mcp,
    run_in_directive,
    scribble_and_directive,
    text_of,
)
from tests.kiwi_cli import kiwi_env, run_kiwi


@pytest.fixture
def worktree() -> Iterator[Path]:
    with git_worktree() as tree:
        yield tree


async def test_a_run_that_changes_state_in_a_directive_is_checkpointed_and_rolled_back_over_mcp(
    database_url: str, conn: psycopg.Connection, tmp_path: Path, publish_tool: Callable[..., str], worktree: Path
) -> None:
    tool, directive = scribble_and_directive(publish_tool, worktree)
    head = git(worktree, "rev-parse", "HEAD")
    async with kiwi_mcp(database_url, tmp_path, worktree) as client:
        ran = await run_in_directive(client, tool, directive, worktree)
        checkpoint = ran["checkpoint"]
        assert files_of(worktree) == AFTER, "the tool ran, after its checkpoint"
        assert f"item_id={checkpoint['run_id']}" in ran["text"], "the answer says how to undo the run"
        rolled = await client.call_tool("execute", {"action": "rollback", "item_id": checkpoint["run_id"]})
    assert not rolled.is_error, text_of(rolled)
    assert files_of(worktree) == BEFORE, "edited, removed and new files are back as they were"
    assert git(worktree, "diff", "--cached", "--name-only") == "s.txt", "the index too"
    assert git(worktree, "rev-parse", "HEAD") == head
    done = rolled.structured_content or {}
    assert (done["run_id"], done["worktree"], done["checkpoint"]) == (
        checkpoint["run_id"],
        str(worktree),
        checkpoint["checkpoint"],
    )
    assert git(worktree, "rev-parse", f"refs/kiwi/checkpoints/{checkpoint['checkpoint']}") == checkpoint["checkpoint"]

    row = conn.execute(
        "select to_jsonb(c) from run_checkpoints c where run_id = %s", (checkpoint["run_id"],)
    ).fetchone()
    assert row is not None
    recorded = row[0]
    assert recorded["context_id"] == ran["context_id"] and recorded["directive"] == f"{directive}@1.0.0"
    assert recorded["tool_id"] == tool and recorded["checkpoint_tool"] == "git_checkpoint@1.0.0"
    assert recorded["restored_at"] is not None
    run = conn.execute("select tool_id, status from tool_runs where id = %s", (checkpoint["run_id"],)).fetchone()
    assert run == (tool, "success"), "the checkpoint names the run's own record"
    checkpoint_runs = conn.execute(
        "select count(*) from tool_runs where tool_id = 'git_checkpoint' and started_at > now() - interval '5 minutes'"
    ).fetchone()
    assert checkpoint_runs is not None and checkpoint_runs[0] >= 2, "taking and restoring are runs like any other"


async def test_kiwi_rollback_restores_the_checkpoint_of_a_run_from_the_command_line(
    database_url: str, tmp_path: Path, publish_tool: Callable[..., str], worktree: Path
) -> None:
    tool, directive = scribble_and_directive(publish_tool, worktree)
    async with kiwi_mcp(database_url, tmp_path, worktree) as client:
        ran = await run_in_directive(client, tool, directive, worktree)
    assert files_of(worktree) == AFTER
    env = kiwi_env(database_url, tmp_path / "cache")
    elsewhere = run_kiwi(["rollback", ran["checkpoint"]["run_id"]], cwd=tmp_path, env=env)
    assert elsewhere.code == 2 and f"run kiwi rollback in {worktree}" in elsewhere.err, elsewhere.err
    assert files_of(worktree) == AFTER, "a rollback outside the checkpoint's working tree changes nothing"

    done = run_kiwi(["rollback", ran["context_id"], "--json"], cwd=worktree, env=env)
    assert done.code == 0, done.err
    assert files_of(worktree) == BEFORE
    assert '"run_id": "' + ran["checkpoint"]["run_id"] in done.out, "a context rolls back to its first checkpoint"


async def test_no_checkpoint_outside_a_directive_and_no_run_without_one_inside(
    database_url: str, tmp_path: Path, publish_tool: Callable[..., str], worktree: Path
) -> None:
    tool, directive = scribble_and_directive(publish_tool, worktree)
    async with kiwi_mcp(database_url, tmp_path, worktree.parent) as client:  # not a git working tree
        started = await client.call_tool("execute", {"action": "run", "item_id": directive})
        context = (started.structured_content or {})["context"]["id"]
        refused = await client.call_tool(
            "execute", {"action": "run", "item_id": tool, "parameters": {"dir": str(worktree)}, "context": context}
        )
        assert refused.is_error and (refused.structured_content or {})["failure"]["kind"] == "checkpoint_failed"
        assert "no checkpoint of" in text_of(refused) and "KIWI_WORKTREE" in text_of(refused)
        assert files_of(worktree) == BEFORE, "without its checkpoint the tool does not run"
        params = {"dir": str(worktree)}
        plain = await client.call_tool("execute", {"action": "run", "item_id": tool, "parameters": params})
    assert not plain.is_error, text_of(plain)
    assert "checkpoint" not in (plain.structured_content or {}), "outside a directive, no checkpoint is taken"
    assert files_of(worktree) == AFTER
