"""A rollback restores a working tree with the checkpoint tool, as the caller: only the caller
whose run it was may roll it back. Another user (a real JWT on the local stack), through the
CLI and through Kiwi's MCP server, and an admin, are refused as if the run had no checkpoint,
and the tree stays as the run left it."""

from __future__ import annotations

import uuid
from collections.abc import Callable, Iterator
from pathlib import Path

import pytest

from runner import LOCAL_JWT_SECRET, from_claims
from runner import sign_token as sign
from tests.checkpoint_setup import (
    AFTER,
    BEFORE,
    files_of,
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


async def test_someone_elses_run_cannot_be_rolled_back(
    database_url: str, tmp_path: Path, publish_tool: Callable[..., str], worktree: Path
) -> None:
    tool, directive = scribble_and_directive(publish_tool, worktree)
    async with kiwi_mcp(database_url, tmp_path, worktree) as client:  # the local owner's run
        ran = await run_in_directive(client, tool, directive, worktree)
    run_id = ran["checkpoint"]["run_id"]
    assert files_of(worktree) == AFTER

    other = str(uuid.uuid4())
    claims = {"sub": other, "role": "authenticated", "aud": "authenticated"}
    token = sign(claims, LOCAL_JWT_SECRET)
    env = kiwi_env(database_url, tmp_path / "cache", KIWI_ACCESS_TOKEN=token, KIWI_WORKTREE=str(worktree))
    for target in (run_id, ran["context_id"]):
        refused = run_kiwi(["rollback", target], cwd=tmp_path, env=env)
        assert refused.code == 3 and "no checkpoint of run or context" in refused.err, refused.err
    admin = run_kiwi(["--admin", "rollback", run_id], cwd=tmp_path, env={**env, "KIWI_ACCESS_TOKEN": ""})
    assert admin.code == 3 and "no checkpoint of run or context" in admin.err, (
        "an admin reads it, but restores only theirs"
    )

    async with kiwi_mcp(database_url, tmp_path, worktree, principal=from_claims(claims)) as client:
        over_mcp = await client.call_tool("execute", {"action": "rollback", "item_id": run_id})
    assert over_mcp.is_error and (over_mcp.structured_content or {})["error"]["kind"] == "not_found", text_of(over_mcp)
    assert files_of(worktree) == AFTER, "the tree stays as the run left it"

    async with kiwi_mcp(database_url, tmp_path, worktree) as client:  # its own caller may
        mine = await client.call_tool("execute", {"action": "rollback", "item_id": run_id})
    assert not mine.is_error, text_of(mine)
    assert files_of(worktree) == BEFORE
