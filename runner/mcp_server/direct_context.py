"""A directive's tool context as direct mode lists it: the tools its manifest declares in
`requires`, each under an MCP tool name with its manifest's description and input schema.

    found = await read_context(runner, "create_script_tool", strict=True)   # at start-up
    found = await read_context(runner, "create_script_tool", strict=False)  # after a registry change

An imported MCP tool keeps `server.tool`; `ns/x` is listed as `ns_x`. Tools run at the version
the directive pins, else the latest. At start-up (`strict`) an unknown or invisible directive,
one that is not a directive, or a required tool that is not available is an error; later (the
registry changed under a running server) nothing is: a tool that is gone is left out, and a
directive that is gone leaves no tools.
"""

from __future__ import annotations

import asyncio
import re
from collections.abc import Mapping
from dataclasses import dataclass, field
from typing import Any

from mcp_types import Tool as MCPTool

from ..core.plan import Plan
from ..core.refs import ToolRef, normalize_ref
from ..errors import KiwiError, UsageError
from ..harness.run import Runner

__all__ = ["DirectTool", "ToolContext", "declared", "mcp_name", "read_context"]

_NOT_IN_NAME = re.compile(r"[^A-Za-z0-9_.-]")  # MCP tool names: 1-128 of these (2025-11-25)


@dataclass(frozen=True)
class DirectTool:
    """One tool of the directive's context, as the direct server lists and runs it."""

    name: str  # the MCP tool name
    ref: str  # the registry reference it runs
    version: str | None  # the version the directive pins; None: the latest at each call
    title: str | None
    description: str
    input_schema: dict[str, Any]

    def listed(self) -> MCPTool:
        return MCPTool(name=self.name, title=self.title, description=self.description, input_schema=self.input_schema)


@dataclass(frozen=True)
class ToolContext:
    """What one reading of the directive found: the directive's plan (None: it is gone), its
    tools in its order, and why each declared tool left out is left out."""

    directive: Plan | None
    tools: list[DirectTool] = field(default_factory=list)
    skipped: list[str] = field(default_factory=list)

    @property
    def shown(self) -> str | None:
        """The directive as `ref@version`."""
        return f"{self.directive.tool_id}@{self.directive.version}" if self.directive else None


@dataclass(frozen=True)
class _Wanted:
    ref: str
    version: str | None
    required: bool


def mcp_name(ref: str) -> str:
    """The MCP tool name of a registry reference: `ns/x` is `ns_x`, `server.tool` stays."""
    return _NOT_IN_NAME.sub("_", normalize_ref(ref))[:128]


def declared(requires: Any) -> list[_Wanted]:
    """The tools a directive's `requires` names, in its order (format: runner/handlers/directive.py)."""
    requires = requires if isinstance(requires, Mapping) else {}
    wanted: list[_Wanted] = []
    for item in requires.get("tools") or []:
        item = {"id": item} if isinstance(item, str) else item
        wanted.append(_Wanted(normalize_ref(item["id"]), item.get("version"), item.get("required", True)))
    for item in requires.get("mcp") or []:
        server = normalize_ref(item["server"])
        for name in item.get("tools") or []:
            wanted.append(_Wanted(f"{server}.{_NOT_IN_NAME.sub('_', name)}", None, item.get("required", True)))
    return wanted


def _input_schema(parameters: dict[str, Any] | None) -> dict[str, Any]:
    schema = dict(parameters or {})
    schema.setdefault("type", "object")
    if schema["type"] == "object":
        schema.setdefault("properties", {})
    return schema


def _tool(want: _Wanted, plan: Plan) -> DirectTool:
    manifest = plan.manifest or {}
    description = str(manifest.get("description") or f"{plan.tool_type} {plan.tool_id}")
    title = manifest.get("name") if isinstance(manifest.get("name"), str) else None
    return DirectTool(mcp_name(want.ref), want.ref, want.version, title, description, _input_schema(plan.parameters))


async def _resolve(runner: Runner, directive: str, want: _Wanted, strict: bool) -> DirectTool | str:
    """The tool, or why it is left out (an optional one, or any one when not `strict`)."""
    try:
        return _tool(want, await runner.plan(want.ref, want.version))
    except KiwiError as e:
        if want.required and strict:
            raise UsageError(
                f"directive {directive} requires {want.ref}, which is not available: {e.message}",
                hint=e.hint or f"publish {want.ref} (or import it: kiwi mcp import SERVER), then start again",
            ) from None
        return f"{want.ref}: {e.message}"


async def read_context(runner: Runner, directive: str, *, strict: bool) -> ToolContext:
    """The tool context of `directive` (ref or ref@version), read as the registry acts now."""
    named = ToolRef.parse(directive)
    try:
        plan = await runner.plan(named.ref, named.version)
    except KiwiError:
        if strict:
            raise
        return ToolContext(None)
    if plan.tool_type != "directive":
        if not strict:
            return ToolContext(None)
        raise UsageError(
            f"{plan.tool_id} is a {plan.tool_type}, not a directive: --directive names a directive",
            hint="find directives with: kiwi search type:directive",
        )
    shown = f"{plan.tool_id}@{plan.version}"
    wanted = declared((plan.manifest or {}).get("requires"))
    found = await asyncio.gather(*(_resolve(runner, shown, w, strict) for w in wanted))
    tools = _first_of_each_name([t for t in found if isinstance(t, DirectTool)], shown, strict)
    return ToolContext(plan, tools, [s for s in found if isinstance(s, str)])


def _first_of_each_name(tools: list[DirectTool], shown: str, strict: bool) -> list[DirectTool]:
    """Names must be unique: at start-up a clash is an error; later the first one is kept."""
    names = [t.name for t in tools]
    if len(set(names)) == len(names):
        return tools
    if strict:
        clashing = sorted({n for n in names if names.count(n) > 1})
        raise UsageError(
            f"directive {shown} declares tools whose MCP names clash: {', '.join(clashing)}",
            hint="declare each tool once; `ns/x` and `ns_x` share the MCP name ns_x",
        )
    return [t for i, t in enumerate(tools) if t.name not in names[:i]]
