"""execute's `import`: `kiwi mcp import SERVER` for an agent. Only the registry row named by
item_id decides what is started; no other argument of the request reaches the command. It
goes through the runner's own MCP pool, so the imported tools then run on the same session."""

from __future__ import annotations

import asyncio
from typing import Any

from mcp_types import CallToolResult, TextContent

from ...errors import ConfigError, NotFound, PrimitiveError, Refused, UsageError
from ...mcp_client.importer import ImportReport, import_server
from ...search import embed_published
from .args import ExecuteRequest, split_ref
from .results import fail, jsonable, ok
from .state import ServerState

__all__ = ["import_tools"]


async def import_tools(state: ServerState, req: ExecuteRequest) -> CallToolResult:
    """The mcp_server's tools/list, published as one mcp_tool per tool (`<server>.<tool>`)."""
    ref = await _mcp_server(state, req)
    if state.mcp_pool is None:
        raise ConfigError(
            "this server has no MCP client pool, so it cannot reach MCP servers",
            hint="build it with build_server(runner, mcp_pool=pool), the pool given to "
            "runner.handlers.standard_handlers(mcp_pool=pool) for the runner's dispatcher",
        )
    work = import_server(state.registry, state.mcp_pool, ref, state.runner.environ, state.runner.sandbox)
    try:
        report = await asyncio.wait_for(work, timeout=state.run_timeout_s)
    except TimeoutError:
        return fail(
            f"importing {ref} did not finish within the server's limit of {state.run_timeout_s:g} s",
            "check that the server starts and answers tools/list (kiwi mcp import shows its errors)",
            kind="timeout",
        )
    except (PrimitiveError, ConfigError) as e:  # the server did not start, or cannot be reached
        own = e.hint.rstrip(".") + "; " if isinstance(e, ConfigError) and e.hint else ""
        return fail(
            e.message,
            own + f"the server's command, url and environment are in load(item_id='{ref}'); fix them with "
            "action='update', then import again",
            kind=e.kind,
        )
    structured: dict[str, Any] = {"action": "import", **report.as_json()}
    text = _import_text(report)
    _, unembedded = await embed_published(state.registry, state.embedder)  # never fails the import
    if unembedded:
        structured["warnings"] = [unembedded]
        text += f"\nwarning: {unembedded}"
    if report.ok:
        return ok(text, structured)
    hint = "each failed tool names its error; fix the cause and import again (published tools stay)"
    structured["error"] = {"kind": "refused", "message": "some tools could not be published", "hint": hint}
    return CallToolResult(
        content=[TextContent(type="text", text=f"error: {text}\nhint: {hint}")],
        structured_content=jsonable(structured),
        is_error=True,
    )


async def _mcp_server(state: ServerState, req: ExecuteRequest) -> str:
    """The mcp_server to import, checked: its latest version, named by item_id alone."""
    ref, ver = split_ref(req.item_id, None)
    if ver is not None:
        raise UsageError(
            f"import takes the server's latest version, not @{ver}",
            hint=f"give item_id='{ref}'; publish the server version you want as the latest first",
        )
    if req.manifest or req.files or req.parameters:
        raise UsageError(
            "import takes only item_id",
            hint="what is started comes from the mcp_server's registry row alone; change the server with "
            "action='update', then import it",
        )
    try:
        top = (await state.registry.chain(ref))[0]
    except NotFound as e:
        raise NotFound(
            e.message, hint="find MCP servers with search(query='type:mcp_server'), then import one by its id"
        ) from e
    if top.get("tool_type") != "mcp_server":
        raise Refused(
            f"{top['tool_id']} is a {top.get('tool_type')}, not an mcp_server; only MCP servers are imported",
            hint="find one with search(query='type:mcp_server'), or publish one (tool_type mcp_server, "
            "executor subprocess, config {transport, command, args} or {transport, url})",
        )
    return ref


def _import_text(report: ImportReport) -> str:
    counts = report.counts()
    order = ("created", "changed", "held", "unchanged", "new", "missing", "error")
    summary = ", ".join(f"{counts[s]} {s}" for s in order if s in counts)
    lines = [f"imported {report.server}: {summary or 'no tools listed'}"]
    for t in report.tools:
        line = f"  {t.status:<9} {t.tool_id}" + (f"@{t.version}" if t.version else "")
        if t.status == "changed":
            line += f" (was {t.previous_version}; upstream changed its {' and '.join(t.changed)})"
        elif t.status == "held":
            line += (
                f" (upstream changed its {' and '.join(t.changed)}: held for review as change {t.change}; "
                f"callers keep {t.previous_version})"
            )
        elif t.status == "missing":
            line += " (no longer listed by the server; kept)"
        for note in t.notes:  # e.g. a description cut to the registry's limit
            line += f" ({note})"
        if t.error:
            line += f": {t.error}"
        lines.append(line)
    listed = [t.tool_id for t in report.tools if t.status != "missing"]
    if listed:
        lines.append(f"\nnext: load(item_id='{listed[0]}') for its parameters, then execute(action='run', ...)")
    return "\n".join(lines)
