"""Direct mode: a server started for one directive, offering that directive's tool context (the
tools its manifest declares in `requires`) as ordinary MCP tools, for clients that do not
use meta-tools.

    server = await build_direct_server(runner, "create_script_tool")   # kiwi serve --directive REF

Each declared tool is listed under an MCP tool name made of its reference (`ns/x` is `ns_x`;
an imported MCP tool keeps `server.tool`), with the description and input schema of its
manifest. A call runs exactly as `execute run` does (meta/run.py `guarded_run`): the Runner's
gate checks the permissions of the directive's execution context, `check_call`'s rate limits
and approvals, and audits it. That context is opened once per client session, as the
caller (over HTTP, the request's verified principal), with its own audit row, like
`execute open_context`. Nothing but the listed tools can be called: any other name is
-32602 "Unknown tool", and nothing runs.

The directive and its tools are read once, at start-up, as the server's own principal: an
unknown or invisible directive, or a required tool that is not available, is an error
then. An optional tool that is not available is left out (said in `skipped`). Tools run at
the version the directive pins, else the latest.
"""

from __future__ import annotations

import asyncio
import re
import time
import uuid
from collections.abc import Mapping
from dataclasses import dataclass
from typing import Any

from mcp.server.mcpserver import Context, MCPServer
from mcp.shared.exceptions import MCPError
from mcp_types import INVALID_PARAMS, CallToolResult, TextContent
from mcp_types import Tool as MCPTool

from ..core.plan import Plan
from ..core.refs import ToolRef, normalize_ref
from ..errors import KiwiError, UsageError
from ..harness.run import Runner
from .auth import request_principal
from .meta.audit import audited_action
from .meta.results import guarded, jsonable, ok
from .meta.run import guarded_run
from .meta.state import session_of

__all__ = ["DirectServer", "DirectTool", "build_direct_server", "mcp_name"]

_NOT_IN_NAME = re.compile(r"[^A-Za-z0-9_.-]")  # MCP tool names: 1-128 of these (2025-11-25)
CONTEXT_TTL_S = 12 * 3600.0
"""How long one session's execution context is used before a new one is opened (the
database expires contexts after a day)."""
INSTRUCTIONS_LIMIT = 8000


@dataclass(frozen=True)
class DirectTool:
    """One tool of the directive's context, as this server lists and runs it."""

    name: str  # the MCP tool name
    ref: str  # the registry reference it runs
    version: str | None  # the version the directive pins; None: the latest at each call
    title: str | None
    description: str
    input_schema: dict[str, Any]

    def listed(self) -> MCPTool:
        return MCPTool(name=self.name, title=self.title, description=self.description, input_schema=self.input_schema)


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


async def _resolve(runner: Runner, directive: str, want: _Wanted) -> DirectTool | str:
    """The tool, or (an optional one that is not available) why it is left out."""
    try:
        return _tool(want, await runner.plan(want.ref, want.version))
    except KiwiError as e:
        if want.required:
            raise UsageError(
                f"directive {directive} requires {want.ref}, which is not available: {e.message}",
                hint=e.hint or f"publish {want.ref} (or import it: kiwi mcp import SERVER), then start again",
            ) from None
        return f"{want.ref}: {e.message}"


class DirectServer(MCPServer):
    """An MCP server whose tools are one directive's tool context, each call through the gate."""

    def __init__(
        self,
        runner: Runner,
        directive: Plan,
        tools: list[DirectTool],
        *,
        skipped: list[str],
        run_timeout_s: float | None,
        name: str,
    ) -> None:
        super().__init__(name, instructions=_instructions(directive, tools), log_level="WARNING")
        self.runner = runner
        self.directive = f"{directive.tool_id}@{directive.version}"
        self.tools = {t.name: t for t in tools}
        self.skipped = skipped
        self.run_timeout_s = run_timeout_s
        self.server_session = f"mcp-direct-{uuid.uuid4()}"
        self._contexts: dict[tuple[str, str | None, str | None], tuple[str, float]] = {}

    def summary(self) -> str:
        names = ", ".join(self.tools) or "none"
        left = f"; left out (optional, not available): {'; '.join(self.skipped)}" if self.skipped else ""
        return f"direct mode: the tool context of {self.directive} as MCP tools: {names}{left}"

    async def list_tools(self) -> list[MCPTool]:
        return [tool.listed() for tool in self.tools.values()]

    async def call_tool(
        self, name: str, arguments: dict[str, Any], context: Context[Any, Any] | None = None
    ) -> CallToolResult:
        tool = self.tools.get(name)
        if tool is None:
            raise MCPError(
                INVALID_PARAMS,
                f"Unknown tool: {name}; this server serves only the tool context of directive {self.directive}",
                data={"tools": sorted(self.tools)},
            )
        session = session_of(context, self.server_session)
        return await guarded(name, lambda: self._run(tool, session, dict(arguments or {})))

    async def _run(self, tool: DirectTool, session: str, arguments: dict[str, Any]) -> CallToolResult:
        context_id = await self._context(session)
        result = await guarded_run(
            self.runner,
            self.runner.registry,
            session=session,
            ref=tool.ref,
            ver=tool.version,
            params=arguments,
            context=context_id,
            run_timeout_s=self.run_timeout_s,
        )
        return _direct_hint(result, tool)

    async def _context(self, session: str) -> str:
        """The directive's execution context for this session and caller, opened (and audited,
        as `execute open_context` is) at its first call."""
        principal = request_principal()
        key = (session, principal.role if principal else None, principal.user_id if principal else None)
        known = self._contexts.get(key)
        if known is not None and time.monotonic() - known[1] < CONTEXT_TTL_S:
            return known[0]
        registry = self.runner.registry
        opened: dict[str, Any] = {}

        async def work() -> CallToolResult:
            opened.update(await registry.open_context(session, self.directive, None, None))
            return ok(f"opened context {opened.get('id')}", {"action": "open_context", "context": opened})

        inputs = {"item_id": self.directive, "mode": "direct"}
        await audited_action(
            registry, session=session, action="open_context", subject=self.directive, inputs=inputs, work=work
        )
        context_id = str(opened["id"])
        if len(self._contexts) >= 4096:
            self._contexts.clear()
        self._contexts[key] = (context_id, time.monotonic())
        return context_id


def _instructions(directive: Plan, tools: list[DirectTool]) -> str:
    manifest = directive.manifest or {}
    lines = [
        f"Kiwi, serving the tools of directive {directive.tool_id}@{directive.version}"
        + (f": {manifest['description']}" if manifest.get("description") else "."),
        "Every call runs through Kiwi's gate (the directive's permissions, rate limits, approvals) and is audited.",
        "Tools: " + (", ".join(t.name for t in tools) or "none"),
    ]
    text = directive.entrypoint.content_text if directive.entrypoint else None
    if text:
        lines += ["", text.strip()[:INSTRUCTIONS_LIMIT]]
    return "\n".join(lines)


def _direct_hint(result: CallToolResult, tool: DirectTool) -> CallToolResult:
    """execute's answer, with a hint this client can follow: its tools have no `load`."""
    structured = result.structured_content or {}
    failure = structured.get("failure") if isinstance(structured, dict) else None
    if not result.is_error or not isinstance(failure, dict) or failure.get("kind") != "invalid_parameters":
        return result
    hint = f"the input schema of {tool.name} is in tools/list; pass the arguments as one object that satisfies it"
    old = structured.get("hint")
    text = "".join(c.text for c in result.content if isinstance(c, TextContent))
    text = text.replace(f"hint: {old}", f"hint: {hint}") if old else f"{text}\nhint: {hint}"
    fixed = {**structured, "hint": hint, "failure": {**failure, "hint": hint}}
    return CallToolResult(
        content=[TextContent(type="text", text=text)], structured_content=jsonable(fixed), is_error=True
    )


async def build_direct_server(
    runner: Runner,
    directive: str,
    *,
    run_timeout_s: float | None = 900.0,
    local_spaces: bool = False,
    name: str = "kiwi",
) -> DirectServer:
    """The direct-mode server of `directive` (ref or ref@version), read as the runner's registry
    acts now; raises a KiwiError for a directive that is unknown, invisible, not a directive,
    or whose required tools are not available."""
    runner.local_spaces = local_spaces
    named = ToolRef.parse(directive)
    plan = await runner.plan(named.ref, named.version)
    if plan.tool_type != "directive":
        raise UsageError(
            f"{plan.tool_id} is a {plan.tool_type}, not a directive: --directive names a directive",
            hint="find directives with: kiwi search type:directive",
        )
    shown = f"{plan.tool_id}@{plan.version}"
    found = await asyncio.gather(*(_resolve(runner, shown, w) for w in declared(plan.manifest.get("requires"))))
    tools = [t for t in found if isinstance(t, DirectTool)]
    names = [t.name for t in tools]
    if len(set(names)) != len(names):
        clashing = sorted({n for n in names if names.count(n) > 1})
        raise UsageError(
            f"directive {shown} declares tools whose MCP names clash: {', '.join(clashing)}",
            hint="declare each tool once; `ns/x` and `ns_x` share the MCP name ns_x",
        )
    skipped = [s for s in found if isinstance(s, str)]
    return DirectServer(runner, plan, tools, skipped=skipped, run_timeout_s=run_timeout_s, name=name)
