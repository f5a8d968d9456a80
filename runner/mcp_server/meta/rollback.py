"""execute's rollback: a run that changed state inside a directive is put back to the checkpoint
taken before it (runner/harness/checkpoint.py), as `kiwi rollback RUN` does; item_id is the run's
id, or a directive's context id (its first checkpoint)."""

from __future__ import annotations

from mcp_types import CallToolResult

from ...errors import UsageError
from ...harness.checkpoint import rollback as restore
from .args import ExecuteRequest
from .results import ok
from .state import ServerState

__all__ = ["rollback"]


async def rollback(state: ServerState, req: ExecuteRequest) -> CallToolResult:
    if not req.item_id:
        raise UsageError(
            "rollback needs item_id: the id of the run to roll back (or of the directive's context)",
            hint="a run that took a checkpoint answers with checkpoint.run_id",
        )
    done = await restore(state.runner, req.item_id, req.session)
    text = f"rolled back {done['worktree']} to checkpoint {done['checkpoint']} (taken before run {done['run_id']})"
    return ok(text, {"action": "rollback", **done})
