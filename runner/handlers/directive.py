"""Running a directive: its instructions, its inputs, and a tool context of exactly the tools
it declares, each with its availability.

A directive's manifest (format: supabase/schemas/230_directives.sql) declares

    requires:    tools: [{id, required, version}]            registry tools
                 mcp:   [{server, alias, tools: [names], required}]  imported MCP tools,
                        <server>.<name>, called as <alias>.<name> when an alias is given
    permissions: {fs_read, fs_write, shell, mcp, tools, net}  passed on as declared
    cites:       [knowledge ids]                              reported with their availability

The result is the context an agent needs to follow it. A missing required tool makes the
run an error (the context is still returned, with a hint); a missing optional tool or
cited entry is a warning, in the output and in Outcome.detail. Lookups cost one batched
chain query plus one plan per available tool, in parallel.
"""

from __future__ import annotations

import asyncio
import re
from collections.abc import Mapping
from dataclasses import dataclass
from typing import Any

from ..core.plan import Plan
from ..core.refs import normalize_ref
from ..errors import ConfigError, KiwiError
from ..primitives.base import Invocation, Outcome
from ..registry.base import Registry

PERMISSION_KEYS = ("fs_read", "fs_write", "shell", "mcp", "tools", "net")
_NOT_IN_ID = re.compile(r"[^A-Za-z0-9_.-]")  # as runner/mcp_client/importer.py names imported tools


@dataclass
class _Wanted:
    """One declared tool: a registry tool, or one tool of an MCP server."""

    id: str
    kind: str  # tool | mcp_tool
    required: bool
    version: str | None = None
    server: str | None = None
    name: str | None = None  # the upstream MCP tool name
    alias: str | None = None  # what the directive calls the server (alias.tool)


class DirectiveHandler:
    name = "directive"

    def accepts(self, plan: Plan) -> bool:
        return plan.tool_type == "directive"

    async def aclose(self) -> None:
        return None

    async def run(self, invocation: Invocation) -> Outcome:
        plan, registry = invocation.plan, invocation.registry
        if registry is None:
            raise ConfigError(
                f"{plan.tool_id}: a directive needs the registry to look up its tools",
                hint="run it through runner.harness.run.Runner, which passes its registry",
            )
        manifest = plan.manifest
        requires = manifest.get("requires") or {}
        wanted = _wanted(requires)
        servers = sorted({w.server for w in wanted if w.server})
        cites = [str(c) for c in manifest.get("cites") or []]

        refs = list(dict.fromkeys([w.id for w in wanted] + servers + cites))
        rows = _roots(await registry.chains_batch(refs)) if refs else {}
        tools = await asyncio.gather(*(_tool_entry(registry, w, rows) for w in wanted))

        warnings: list[str] = []
        missing: list[dict[str, Any]] = []
        for entry in tools:
            if entry["available"]:
                continue
            line = f"{entry['id']}: {entry['reason']}" + (f" ({entry['hint']})" if entry.get("hint") else "")
            if entry["required"]:
                missing.append(entry)
            else:
                warnings.append(f"optional tool {line}")
        cited = [_cite_entry(c, rows) for c in cites]
        warnings += [f"cited knowledge {c['id']}: {c['reason']}" for c in cited if not c["available"]]

        entrypoint = plan.entrypoint
        instructions = entrypoint.content_text if entrypoint else None
        if instructions is None:
            warnings.append("the directive has no instructions file (entrypoint)")
        output = {
            "directive": {
                "tool_id": plan.tool_id,
                "version": plan.version,
                "instructions": instructions,
                "cites": cited,
            },
            "inputs": invocation.params,
            "tools": tools,
            "permissions": _permissions(manifest.get("permissions")),
            "warnings": warnings,
        }
        detail: dict[str, Any] = {"warnings": warnings} if warnings else {}
        if missing:
            ids = ", ".join(m["id"] for m in missing)
            hints = "; ".join(dict.fromkeys(m["hint"] for m in missing if m.get("hint")))
            reasons = "; ".join(f"{m['id']}: {m['reason']}" for m in missing)
            detail.update({"missing": [m["id"] for m in missing], "hint": hints})
            return Outcome(
                status="error",
                output=output,
                error=f"{plan.tool_id} requires {ids}, not available ({reasons}); hint: {hints}",
                detail=detail,
            )
        return Outcome(status="success", output=output, detail=detail)


def _roots(rows: list[dict[str, Any]]) -> dict[str, dict[str, Any]]:
    """The row of each requested ref itself (depth 0, or its error row)."""
    return {r["requested_tool_id"]: r for r in rows if r.get("depth") in (0, None)}


def _wanted(requires: Mapping[str, Any]) -> list[_Wanted]:
    wanted: list[_Wanted] = []
    for item in requires.get("tools") or []:
        if isinstance(item, str):
            item = {"id": item}
        wanted.append(
            _Wanted(
                id=normalize_ref(item["id"]),
                kind="tool",
                required=item.get("required", True),
                version=item.get("version"),
            )
        )
    for item in requires.get("mcp") or []:
        server = normalize_ref(item["server"])
        for name in item.get("tools") or []:
            wanted.append(
                _Wanted(
                    id=f"{server}.{_NOT_IN_ID.sub('_', name)}",
                    kind="mcp_tool",
                    required=item.get("required", True),
                    server=server,
                    name=name,
                    alias=item.get("alias"),
                )
            )
    return wanted


async def _tool_entry(registry: Registry, want: _Wanted, rows: Mapping[str, dict[str, Any]]) -> dict[str, Any]:
    entry: dict[str, Any] = {"id": want.id, "kind": want.kind, "required": want.required}
    if want.server:
        entry.update(server=want.server, name=want.name, **mcp_route(rows.get(want.server) or {}, want))
    row = rows.get(want.id) or {}
    reason, hint = _unavailable(want, row, rows)
    if reason is None:
        try:
            plan = await registry.plan(want.id, want.version)
        except KiwiError as exc:
            reason, hint = str(exc), exc.hint
        else:
            manifest = row.get("manifest") or {}
            entry.update(
                available=True,
                version=plan.version,
                tool_type=plan.tool_type,
                description=manifest.get("description"),
                parameters=plan.parameters,
            )
            return entry
    entry.update(available=False, version=want.version, reason=reason)
    if hint:
        entry["hint"] = hint
    return entry


def mcp_route(server_row: Mapping[str, Any], want: _Wanted) -> dict[str, Any]:
    """How the agent calls one declared MCP tool: through Kiwi (`call`: the name execute
    action=call takes, alias.tool when the directive gave an alias) or, for a server whose
    config says proxy: false, directly on its own connection to the server (`connect`: how,
    with its ${VAR}s unexpanded)."""
    config = (server_row.get("manifest") or {}).get("config") or {}
    route: dict[str, Any] = {
        "call": f"{want.alias or want.server}.{want.name}",
        "proxy": config.get("proxy") is not False,
    }
    if want.alias:
        route["alias"] = want.alias
    if not route["proxy"]:
        route["connect"] = server_connection(config)
    return route


def server_connection(config: Mapping[str, Any]) -> dict[str, Any]:
    """An MCP server's connection as its manifest writes it (secrets stay ${VAR}s)."""
    keys = ("transport", "command", "args", "url", "headers", "env")
    return {k: config[k] for k in keys if config.get(k) is not None}


def _unavailable(
    want: _Wanted, row: Mapping[str, Any], rows: Mapping[str, dict[str, Any]]
) -> tuple[str | None, str | None]:
    """Why a declared tool cannot be used, and what to do about it; (None, None) if it can."""
    if want.kind == "mcp_tool":
        server = rows.get(want.server or "") or {}
        if server.get("error"):
            return f"MCP server {want.server} is not in the registry ({server['error']})", "kiwi search type:mcp_server"
        if server.get("tool_type") != "mcp_server":
            return f"{want.server} is a {server.get('tool_type')}, not an MCP server", "kiwi search type:mcp_server"
        if row.get("error"):
            return f"not imported from MCP server {want.server}", f"kiwi mcp import {want.server}"
        return None, None
    if row.get("error"):
        return str(row["error"]), f"publish {want.id}, or check the id with: kiwi search {want.id}"
    return None, None


def _cite_entry(cite: str, rows: Mapping[str, dict[str, Any]]) -> dict[str, Any]:
    row = rows.get(cite) or {}
    if row.get("error") or not row:
        return {"id": cite, "available": False, "reason": str(row.get("error") or "not found")}
    if row.get("tool_type") != "knowledge":
        return {"id": cite, "available": False, "reason": f"is a {row.get('tool_type')}, not knowledge"}
    manifest = row.get("manifest") or {}
    return {
        "id": cite,
        "available": True,
        "version": row.get("version"),
        "name": manifest.get("name"),
        "description": manifest.get("description"),
    }


def _permissions(declared: Any) -> dict[str, list[str]]:
    declared = declared if isinstance(declared, Mapping) else {}
    return {key: list(declared.get(key) or []) for key in PERMISSION_KEYS}
