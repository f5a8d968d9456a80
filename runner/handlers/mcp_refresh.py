"""Re-reading an MCP server's tool list, so that a tool changed upstream is held for review
(rug-pull protection, supabase/schemas/620_mcp_tool_changes.sql) without anyone importing:

* on connect: every new session to a server (a runner's first call, and each reconnect after
  the server died or was shut down idle) lists its tools again on that same session, before
  the call it was opened for runs. A changed tool is held (its callers keep the approved
  version) and the run warns of it; tools new upstream are only reported.
* on a schedule: running an `mcp_server` itself (`kiwi run SERVER`, or a schedule of it,
  `kiwi schedule add NAME SERVER --cron ...`) re-reads its list as `kiwi mcp import` does:
  new tools are published, changed ones held. Its output is the import's report.

Who re-reads acts as the run's caller: holding a change needs the right to publish the tool;
for a caller without it, the re-read is skipped with a warning.
"""

from __future__ import annotations

import re
from typing import TYPE_CHECKING, Any

from ..core.refs import ToolRef
from ..errors import KiwiError
from ..mcp_client.importer import ImportReport, review_listing
from ..mcp_client.servers import server_link
from ..primitives.base import Invocation, Outcome

if TYPE_CHECKING:
    from ..core.plan import Plan
    from ..mcp_client.pool import McpPool, ServerSpec

__all__ = ["reread_on_connect", "reread_server"]

_NOT_IN_ID = re.compile(r"[^A-Za-z0-9_.-]")  # as importer.tool_id_for names imported tools


async def reread_on_connect(pool: McpPool, spec: ServerSpec, invocation: Invocation, upstream: str) -> list[str]:
    """The tool list of a session just opened for a call of `upstream`, reviewed against the
    registry; the warnings the run carries (changes held, a re-read that could not be made)."""
    registry = invocation.registry
    if registry is None:
        return []
    target = _target(invocation.plan, upstream)
    try:
        listed = await pool.list_tools(spec)
        report = await review_listing(registry, spec.ref, listed, target=target, create=False)
    except KiwiError as exc:
        return [f"{spec.ref}: its tool list was not re-read for changes: {exc.message}"]
    return _warnings(report)


async def reread_server(pool: McpPool, spec: ServerSpec, invocation: Invocation) -> Outcome:
    """A run of an mcp_server: its tool list re-read and reviewed, as an import."""
    registry = invocation.registry
    if registry is None:
        return Outcome(status="error", error=f"{spec.ref}: re-reading its tools needs the registry")
    listed = await pool.list_tools(spec)
    report = await review_listing(registry, spec.ref, listed, target=server_link(invocation.plan).tool_id)
    detail: dict[str, Any] = {"server": spec.ref, "transport": spec.transport, "warnings": _warnings(report)}
    failure = report.failure()
    if failure is not None:
        return Outcome(status="error", output=report.as_json(), error=failure.message, detail=detail)
    return Outcome(status="success", output=report.as_json(), detail=detail)


def _target(plan: Plan, upstream: str) -> str:
    """What the called tool's id starts with (the server's ref, or the namespace it was imported
    into): its id without `.<upstream name>`."""
    own = ToolRef.parse(plan.tool_id, strict=False).ref
    suffix = "." + _NOT_IN_ID.sub("_", upstream)
    return own[: -len(suffix)] if own.endswith(suffix) else server_link(plan).tool_id


def _warnings(report: ImportReport) -> list[str]:
    out = []
    for t in report.tools:
        if t.status == "held":
            out.append(
                f"{t.tool_id}: upstream changed its {' and '.join(t.changed)}; the change is held for review "
                f"(kiwi mcp changes; change {t.change}) and {t.previous_version} stays in use"
            )
        elif t.status == "error":
            out.append(f"{t.tool_id}: its upstream change could not be held: {t.error}")
    return out
