"""Checkpoints before runs that change state, and rolling a run back to its checkpoint.

A tool says in its manifest that it changes state (`config.mutates_state: true`). When such a
tool runs inside a directive (a call made in a context a directive opened), the checkpoint
tool runs first, as any tool runs: through the gate (as the caller's session, audited, under
its limits and approval policies) and in its sandbox. What it took is recorded against the id
the run's own record will carry (public.run_checkpoints, the caller's own rows), and the run
goes on; no checkpoint, no run. `kiwi rollback RUN` and MCP `execute action=rollback` read
the row back and run the same checkpoint tool to restore it.

The checkpoint tool is data: `git_checkpoint` (supabase/seed/git_checkpoint/), a commit of a
git working tree. The working tree is the runner's: KIWI_WORKTREE, else the directory kiwi
runs in, the same `${KIWI_WORKTREE:-.}` the tool's sandbox profile mounts, so the tool reaches
exactly the tree it is asked about. A rollback restores a checkpoint of that tree only.
"""

from __future__ import annotations

import os
import uuid
from collections.abc import Mapping
from pathlib import Path
from typing import Any, Protocol

from ..core.plan import Plan
from ..errors import Refused, UsageError
from ..policy import Call
from ..registry.base import Registry, checked_uuid


class Runner(Protocol):
    """What a checkpoint needs of the runner (run.py's Runner, which calls checkpoint_before):
    its environment, its registry, and a gated run."""

    @property
    def environ(self) -> Mapping[str, str]: ...

    @property
    def registry(self) -> Registry: ...

    async def run(self, tool_id: str, params: Any, *, version: str | None = ..., call: Call | None = ...) -> Any: ...


__all__ = ["CHECKPOINT_TOOL", "CheckpointFailed", "checkpoint_before", "rollback", "worktree_of"]

CHECKPOINT_TOOL = "git_checkpoint"
WORKTREE_VARIABLE = "KIWI_WORKTREE"
WORKTREE_HINT = (
    "run kiwi in the git working tree the directive works on, or set KIWI_WORKTREE to it; "
    "as root the sandbox writes as nobody (uid 65534), who must be able to write the tree"
)


class CheckpointFailed(Refused):
    """A tool that changes state was not run because no checkpoint could be taken, or a
    rollback did not restore its checkpoint."""

    kind = "checkpoint_failed"


def worktree_of(environ: Mapping[str, str]) -> Path:
    """The working tree a runner checkpoints: KIWI_WORKTREE, else its working directory, as the
    checkpoint tool's sandbox profile resolves `${KIWI_WORKTREE:-.}`."""
    named = environ.get(WORKTREE_VARIABLE) or "."
    return Path(os.path.realpath(Path(named).expanduser()))


async def checkpoint_before(
    runner: Runner, plan: Plan, call: Call, audit: Mapping[str, Any], dry_run: bool
) -> dict[str, Any] | None:
    """Take and record the checkpoint a run of `plan` needs before it runs (None when it needs
    none: a dry run, a tool that does not change state, a call outside a directive). Raises
    CheckpointFailed when none could be taken: the tool then does not run."""
    directive = audit.get("directive")
    if dry_run or plan.config.get("mutates_state") is not True or not call.context or not directive:
        return None
    worktree = worktree_of(runner.environ)
    taken = await runner.run(CHECKPOINT_TOOL, {"action": "create", "worktree": str(worktree)}, call=Call(call.session))
    output = taken.output if isinstance(taken.output, dict) else {}
    if not taken.ok or not isinstance(output.get("checkpoint"), str):
        why = taken.error or "it answered no checkpoint"
        raise CheckpointFailed(
            f"{plan.tool_id} changes state (config.mutates_state) and runs inside directive {directive}, "
            f"but no checkpoint of {worktree} could be taken ({why}); it was not run",
            hint=WORKTREE_HINT,
        )
    row = {
        "run_id": call.run_id or str(uuid.uuid4()),  # the id the run's own record is written under
        "context_id": str(call.context),
        "directive": str(directive),
        "tool_id": plan.tool_id,
        "checkpoint_tool": f"{taken.tool_id}@{taken.version}" if taken.version else taken.tool_id,
        "worktree": str(worktree),
        "checkpoint": output["checkpoint"],
    }
    recorded = await runner.registry.record_checkpoint(row)
    shown = ("id", "run_id", "context_id", "worktree", "checkpoint", "checkpoint_tool", "created_at")
    return {key: recorded.get(key) for key in shown}


async def rollback(runner: Runner, target: str, session: str) -> dict[str, Any]:
    """Restore the caller's checkpoint of run `target` (or the first of context `target`) with
    the tool that took it, and mark it restored. Someone else's run has no checkpoint for the
    caller (NotFound); a checkpoint of another working tree than the runner's is refused."""
    wanted = checked_uuid(target, f"not a run id: {target!r}", "run ids are uuids: `kiwi runs` lists yours")
    found = await runner.registry.rollback_checkpoint(wanted)
    worktree = worktree_of(runner.environ)
    if Path(found["worktree"]) != worktree:
        raise UsageError(
            f"the checkpoint of {target} is of {found['worktree']}, not of this kiwi's working tree {worktree}",
            hint=f"run kiwi rollback in {found['worktree']}, or with KIWI_WORKTREE={found['worktree']}",
        )
    tool, _, version = str(found["checkpoint_tool"]).partition("@")
    params = {"action": "restore", "worktree": str(worktree), "checkpoint": found["checkpoint"]}
    result = await runner.run(tool, params, version=version or None, call=Call(session))
    if result.failure is not None:  # refused by the gate, or no such tool
        raise result.failure
    if not result.ok:
        raise CheckpointFailed(f"the checkpoint of {target} was not restored: {result.error}", hint=WORKTREE_HINT)
    marked = await runner.registry.checkpoint_restored(str(found["id"]))
    return {
        "rolled_back": target,
        "run_id": found["run_id"],
        "context_id": found.get("context_id"),
        "tool_id": found["tool_id"],
        "worktree": found["worktree"],
        "checkpoint": found["checkpoint"],
        "restored_at": marked.get("restored_at"),
        "restore": result.output,
    }
