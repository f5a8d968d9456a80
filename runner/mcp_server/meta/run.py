"""execute's run and dry_run, rendered for MCP: the Runner's gate (runner/policy, the same for
every entry point) decides and audits; runner/harness/mcp_answer.py turns its decision and the
run into a tool answer."""

from __future__ import annotations

from typing import Any

from mcp_types import CallToolResult

from ...harness.mcp_answer import rendered_call
from ...harness.run import Runner
from ...primitives.base import RunListener
from ...registry.base import Registry

__all__ = ["guarded_run"]


async def guarded_run(
    runner: Runner,
    reg: Registry,
    *,
    session: str,
    ref: str,
    ver: str | None,
    params: dict[str, Any],
    context: str | None = None,
    approval_id: str | None = None,
    dry_run: bool = False,
    run_timeout_s: float | None = 900.0,
    listener: RunListener | None = None,
) -> CallToolResult:
    """One tool call as `execute run`/`dry_run` makes it, rendered for MCP: the Runner's gate
    (runner/policy) decides permissions, rate limits and approvals and audits the call; a
    refusal is a tool error of its kind. `reg` is kept for the callers' sake: the runner's
    registry is the one used. `listener` follows the run as it runs (runner/mcp_server/notify_run.py
    turns it into the request's notifications)."""
    del reg
    return await rendered_call(
        runner.call_tool,
        session=session,
        ref=ref,
        ver=ver,
        params=params,
        context=context,
        approval_id=approval_id,
        dry_run=dry_run,
        run_timeout_s=run_timeout_s,
        listener=listener,
    )
