"""Direct mode: a server started for one directive, offering that directive's tool context (the
tools its manifest declares in `requires`) as ordinary MCP tools, for clients that do not
use meta-tools.

    server = await build_direct_server(runner, "create_script_tool")   # kiwi serve --directive REF

Each declared tool is listed under an MCP tool name made of its reference (`ns/x` is `ns_x`;
an imported MCP tool keeps `server.tool`), with the description and input schema of its
manifest (direct_context.py reads them). A call runs exactly as `execute run` does
(meta/run.py `guarded_run`): the Runner's gate checks the permissions of the directive's
execution context, `check_call`'s rate limits and approvals, and audits it. That context is
opened once per client session, as the caller (over HTTP, the request's verified
principal), with its own audit row, like `execute open_context`. Nothing but the listed
tools can be called: any other name is -32602 "Unknown tool", and nothing runs.

The directive and its tools are read at start-up, as the server's own principal: an
unknown or invisible directive, or a required tool that is not available, is an error
then. An optional tool that is not available is left out (said in `skipped`). Tools run at
the version the directive pins, else the latest.

The list stays current: when the registry says a tool or directive changed (its NOTIFY,
registry_events.py), the context is read again as that same principal, and if the listed
tools changed, every connected client gets `notifications/tools/list_changed`
(`tools.listChanged` is declared). A tool that has left the context is an unknown tool from
then on; a directive that is gone leaves none.

As `execute run` does, a call streams its tool's stderr lines as log notifications (the
`logging` capability, logging/setLevel) and progress (notify_run.py).

Approvals: a tool under an approval policy answers its first call with a tool error of kind
`approval_pending` and the approval's id (runner/mcp_server/approvals.py). A client without
meta-tools has no `approval_id` argument to give back, so a direct call carries it in the
request's `_meta`, under APPROVAL_META_KEY:

    {"method": "tools/call", "params": {"name": "deploy", "arguments": {...},
                                        "_meta": {"kiwi/approval_id": "<id>"}}}

Once a person approved it, that call (the same arguments) runs once; the pending answer
says so.
"""

from __future__ import annotations

import logging
import time
import uuid
from typing import Any

import anyio
from mcp.server.context import ServerRequestContext
from mcp.server.lowlevel import NotificationOptions
from mcp.server.mcpserver import Context, MCPServer
from mcp.shared.exceptions import MCPError
from mcp.shared.subscriptions import ToolsListChanged
from mcp_types import INVALID_PARAMS, CallToolResult, GetPromptResult
from mcp_types import Tool as MCPTool

from ..core.plan import Plan
from ..harness.run import Runner
from ..primitives.base import RunListener
from ..principal import acting_as, requested
from .agent_notifications import SEND_TIMEOUT_S, Notifier, Watcher, attach_notifications
from .auth import request_principal
from .direct_answers import APPROVAL_META_KEY, approval_in, approval_of, direct_answer
from .direct_context import DirectTool, ToolContext, mcp_name, read_context
from .log_level import install as install_logging
from .meta.audit import audited_action
from .meta.results import guarded, ok
from .meta.run import guarded_run
from .meta.state import session_of, session_of_request
from .notify_run import following
from .registry_events import Change
from .tasks import QueuedCall, install_tasks

__all__ = ["APPROVAL_META_KEY", "DirectServer", "DirectTool", "build_direct_server", "mcp_name"]

logger = logging.getLogger("kiwi.mcp.direct")
CONTEXT_TTL_S = 12 * 3600.0
"""How long one session's execution context is used before a new one is opened (the
database expires contexts after a day)."""
INSTRUCTIONS_LIMIT = 8000


class DirectServer(MCPServer):
    """An MCP server whose tools are one directive's tool context, each call through the gate."""

    def __init__(
        self, runner: Runner, asked: str, found: ToolContext, *, run_timeout_s: float | None, name: str
    ) -> None:
        assert found.directive is not None and found.shown is not None  # read strictly, at start-up
        super().__init__(name, instructions=_instructions(found.directive, found.tools), log_level="WARNING")
        self.runner = runner
        self.asked = asked  # the directive as started (ref or ref@version): what is read again
        self.directive = found.shown
        self.tools = {t.name: t for t in found.tools}
        self.skipped = found.skipped
        self.run_timeout_s = run_timeout_s
        self.server_session = f"mcp-direct-{uuid.uuid4()}"
        self.reader = requested()  # whom the context is read as: the server's principal at start-up
        self._contexts: dict[tuple[str, str, str | None, str | None], tuple[str, float]] = {}
        """(directive@version, session, role, user) -> the execution context opened, and when."""

    def summary(self) -> str:
        names = ", ".join(self.tools) or "none"
        left = f"; left out (optional, not available): {'; '.join(self.skipped)}" if self.skipped else ""
        return f"direct mode: the tool context of {self.directive} as MCP tools: {names}{left}"

    async def list_tools(self) -> list[MCPTool]:
        return [tool.listed() for tool in self.tools.values()]

    async def get_prompt(
        self, name: str, arguments: dict[str, Any] | None = None, context: Context[Any, Any] | None = None
    ) -> GetPromptResult:
        """Direct mode offers tools only (prompts/list is empty): any name is an unknown prompt,
        a -32602 naming it, where the SDK's own answer is an internal error and a traceback."""
        raise MCPError(
            INVALID_PARAMS, f"unknown prompt {name[:200]!r}: this server offers the tools of {self.directive}"
        )

    async def refresh(self) -> bool:
        """Read the directive's tool context again (the registry changed); whether the listed
        tools changed. A new version of the directive gets execution contexts of its own (its
        permissions may differ)."""
        with acting_as(self.reader):
            found = await read_context(self.runner, self.asked, strict=False)
        before = [t.listed() for t in self.tools.values()]
        if found.shown is not None and found.shown != self.directive:
            self.directive = found.shown  # later calls open contexts of the new version
        self.tools = {t.name: t for t in found.tools}
        self.skipped = found.skipped
        changed = [t.listed() for t in found.tools] != before
        if changed:
            logger.info("%s", self.summary() if found.directive else f"{self.asked} is gone: no tools")
        return changed

    def listed_tool(self, name: str) -> DirectTool:
        """The listed tool of that name; any other name is -32602 "Unknown tool" (nothing runs)."""
        tool = self.tools.get(name)
        if tool is None:
            raise MCPError(
                INVALID_PARAMS,
                f"Unknown tool: {name}; this server serves only the tool context of directive {self.directive}",
                data={"tools": sorted(self.tools)},
            )
        return tool

    async def call_tool(
        self, name: str, arguments: dict[str, Any], context: Context[Any, Any] | None = None
    ) -> CallToolResult:
        tool = self.listed_tool(name)
        session = session_of(context, self.server_session)
        approval_id = approval_of(context)
        async with following(context, tool.ref) as listener:  # stderr and progress, as execute run streams them
            return await guarded(name, lambda: self._run(tool, session, dict(arguments or {}), approval_id, listener))

    async def _run(
        self,
        tool: DirectTool,
        session: str,
        arguments: dict[str, Any],
        approval_id: str | None,
        listener: RunListener | None,
    ) -> CallToolResult:
        context_id = await self._context(session)
        result = await guarded_run(
            self.runner,
            self.runner.registry,
            session=session,
            ref=tool.ref,
            ver=tool.version,
            params=arguments,
            context=context_id,
            approval_id=approval_id,
            run_timeout_s=self.run_timeout_s,
            listener=listener,
        )
        return direct_answer(result, tool.name)

    async def _context(self, session: str) -> str:
        """The directive's execution context for this session and caller, opened (and audited,
        as `execute open_context` is) at its first call."""
        principal = request_principal()
        directive = self.directive  # a refresh may name a newer version meanwhile: this call's stays
        key = (directive, session, principal.role if principal else None, principal.user_id if principal else None)
        known = self._contexts.get(key)
        if known is not None and time.monotonic() - known[1] < CONTEXT_TTL_S:
            return known[0]
        registry = self.runner.registry
        opened: dict[str, Any] = {}

        async def work() -> CallToolResult:
            opened.update(await registry.open_context(session, directive, None, None))
            return ok(f"opened context {opened.get('id')}", {"action": "open_context", "context": opened})

        inputs = {"item_id": directive, "mode": "direct"}
        await audited_action(
            registry,
            session=session,
            action="open_context",
            subject=directive,
            inputs=inputs,
            work=work,
            keep=self.runner.recorder.submit_audit,
        )
        context_id = str(opened["id"])
        if len(self._contexts) >= 4096:
            self._contexts.clear()
        self._contexts[key] = (context_id, time.monotonic())
        return context_id


class _DirectTasks:
    """Direct mode's tools as MCP tasks (tasks.TaskCalls): each listed tool may run as one, in the
    session's execution context of the directive, with the approval its `_meta` carries."""

    def __init__(self, server: DirectServer) -> None:
        self.server = server

    def task_tools(self) -> frozenset[str]:
        return frozenset(self.server.tools)

    async def queued_call(
        self, name: str, arguments: dict[str, Any], request: ServerRequestContext[Any, Any]
    ) -> QueuedCall:
        server = self.server
        tool = server.listed_tool(name)
        session = session_of_request(request, server.server_session)
        return QueuedCall(
            ref=tool.ref,
            version=tool.version,
            params=arguments,
            session=session,
            context=await server._context(session),
            approval_id=approval_in(request.meta),
        )

    def answer(self, result: CallToolResult, run: dict[str, Any]) -> CallToolResult:
        named = [t.name for t in self.server.tools.values() if t.ref == run.get("tool_id")]
        return direct_answer(result, named[0]) if named else result


def _instructions(directive: Plan, tools: list[DirectTool]) -> str:
    manifest = directive.manifest or {}
    lines = [
        f"Kiwi, serving the tools of directive {directive.tool_id}@{directive.version}"
        + (f": {manifest['description']}" if manifest.get("description") else "."),
        "Every call runs through Kiwi's gate (the directive's permissions, rate limits, approvals) and is audited.",
        f"A call that needs approval answers with an approval id; once a person approved it, make the same call "
        f'with "_meta": {{"{APPROVAL_META_KEY}": "<id>"}} in its params.',
        "Tools: " + (", ".join(t.name for t in tools) or "none"),
    ]
    text = directive.entrypoint.content_text if directive.entrypoint else None
    if text:
        lines += ["", text.strip()[:INSTRUCTIONS_LIMIT]]
    return "\n".join(lines)


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
    found = await read_context(runner, directive, strict=True)
    server = DirectServer(runner, directive, found, run_timeout_s=run_timeout_s, name=name)
    install_logging(server)  # logging/setLevel; the calls stream their stderr (notify_run.py)
    install_tasks(server, runner, runner.registry, _DirectTasks(server))  # each tool may run as a task
    watch = _ContextWatch(server)
    attach_notifications(server, runner.registry, watch, lists=NotificationOptions(tools_changed=True))
    return server


class _ContextWatch(Notifier):
    """Registry changes as direct mode hears them: a change to any tool or directive reads the
    context again, and only a changed tool list is told, to every connected agent (the list
    is the same for all of them, read as the server's principal)."""

    def __init__(self, server: DirectServer) -> None:
        super().__init__(server.runner.registry)
        self.server = server

    async def deliver(self, batch: frozenset[Change]) -> None:
        if not any(change.kind in ("tool", "directive", "*") for change in batch):
            return  # knowledge: not in a tool context
        if not await self.server.refresh():
            return
        async with anyio.create_task_group() as tg:
            for watcher in list(self.watchers.values()):
                tg.start_soon(self._tell_changed, watcher)

    async def _tell_changed(self, watcher: Watcher) -> None:
        try:
            with anyio.move_on_after(SEND_TIMEOUT_S):
                await watcher.send(ToolsListChanged())
        except Exception:  # one agent's failure is not another's
            logger.exception("telling an agent that the tool list changed failed")
