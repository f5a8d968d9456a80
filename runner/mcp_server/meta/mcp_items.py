"""MCP servers as items of their own (item_type="mcp"): `load` of a server lists its tools
with their schemas, and `execute(action="call")` calls one of them through the gate.

    load(item_type="mcp", item_id="everything_mcp")
    execute(action="call", item_type="mcp", item_id="everything_mcp", parameters={"tool": "echo", "message": "hi"})
    execute(action="call", item_id="everything_mcp.echo", parameters={"message": "hi"})
    execute(action="call", item_id="db.query", parameters={...}, context=CTX)   # an alias of the directive

The tools listed are the registry's: the versions imported and approved (an upstream change
waits for review, supabase/schemas/620_mcp_tool_changes.sql), so what an agent reads is
what a person let through. A server whose config says `proxy: false` is listed with its
connection, for an agent that calls it directly; calls through Kiwi still pass the gate.
"""

from __future__ import annotations

from typing import Any

from ...core.plan import Plan
from ...core.refs import ToolRef
from ...errors import NotFound, UsageError
from ...handlers.directive import server_connection
from ...mcp_client.importer import tool_id_for
from .args import ExecuteRequest, check_context_id, split_ref
from .state import ServerState

__all__ = ["call_target", "mcp_listing"]


async def mcp_listing(state: ServerState, plan: Plan) -> dict[str, Any]:
    """The tools of the mcp_server `plan` (or of the server of an mcp_tool) as load shows them."""
    reg = state.registry
    server = plan.mcp_server_link.tool_id if plan.mcp_server_link is not None else plan.tool_id
    config = plan.config if plan.tool_type == "mcp_server" else {}
    rows = [
        r for r in await reg.search(f"mcp:{server}", tool_type="mcp_tool", limit=1000) if r.get("executor_id") == server
    ]
    ids = sorted({str(r["tool_id"]) for r in rows})
    manifests = {
        r["requested_tool_id"]: r
        for r in (await reg.chains_batch(ids) if ids else [])
        if r.get("depth") == 0 and not r.get("error")
    }
    tools = []
    for tool_id in ids:
        row = manifests.get(tool_id)
        if row is None:
            continue
        m = row.get("manifest") or {}
        conf = m.get("config") or {}
        tools.append(
            {
                "name": conf.get("tool") or tool_id.rsplit(".", 1)[-1],
                "tool_id": tool_id,
                "version": row.get("version"),
                "description": m.get("description"),
                "inputSchema": m.get("parameters") or {"type": "object"},
                "outputSchema": m.get("outputs"),
                "annotations": conf.get("annotations"),
            }
        )
    pending = await reg.mcp_changes(server=server)
    listing: dict[str, Any] = {
        "server": server,
        "proxy": config.get("proxy") is not False,
        "tools": tools,
        "pending_changes": [{"id": c["id"], "tool_id": c["tool_id"], "changed": c["changed"]} for c in pending],
    }
    if not listing["proxy"]:
        listing["connect"] = server_connection(config)
    return listing


async def call_target(state: ServerState, req: ExecuteRequest) -> tuple[str, dict[str, Any]]:
    """The mcp_tool an `execute(action="call")` names, and its arguments: item_id a server with
    parameters.tool, a `server.tool`, or an `alias.tool` of the directive of `context`."""
    if not req.item_id:
        raise UsageError("call needs item_id", hint="item_id='SERVER' with parameters={'tool': ...}, or 'SERVER.TOOL'")
    params = dict(req.parameters or {})
    ref, _ = split_ref(req.item_id, None)
    if "tool" in params and isinstance(params["tool"], str):  # 004's form: the server, and the tool by name
        tool = params.pop("tool")
        return tool_id_for(ref, tool), params
    head, _, name = ToolRef.parse(ref, strict=False).tool_id.rpartition(".")
    if head and req.context:
        server = await _aliased(state, req, head)
        if server is not None:
            return tool_id_for(server, name), params
    return ref, params


async def _aliased(state: ServerState, req: ExecuteRequest, alias: str) -> str | None:
    """The server the directive of the call's context calls `alias`, if it declares one."""
    context = await state.registry.get_context(check_context_id(req.context) or "")
    directive = context.get("directive")
    if not directive:
        return None
    ref, version = split_ref(str(directive), None)
    try:
        plan = await state.registry.plan(ref, version)
    except NotFound:
        return None
    for item in (plan.manifest.get("requires") or {}).get("mcp") or []:
        if isinstance(item, dict) and item.get("alias") == alias:
            return str(item["server"])
    return None
