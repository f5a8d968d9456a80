"""Runs `mcp_tool` plans through the session pool.

The plan alone decides everything: its chain names the `mcp_server` (the link whose
type is mcp_server), and its merged config holds the server's connection (stdio:
command, args, env, env_passthrough, cwd; remote: url, headers), the primitive's
defaults, and the tool's own keys (`tool`: the upstream name, `timeout`, `retries`,
`idempotent`; `annotations`: the upstream tool's MCP annotations, as imported).
How the server is started or connected is runner/mcp_client/servers.py's (`server_spec`): with
`${VAR}`s from the runner's environment and no `{placeholders}` at all, so a request's
parameters only ever become the tool call's arguments.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any

import mcp_types as types
from mcp.shared.dispatcher import ProgressFnT
from mcp.shared.exceptions import MCPError

from ..core.identity import ByIdentity
from ..core.plan import Plan
from ..errors import ConfigError
from ..mcp_client.oauth.provider import OAuthSessions
from ..mcp_client.pool import DEFAULT_CALL_TIMEOUT_S, DEFAULT_RETRIES, CallTimedOut, McpPool, ServerSpec
from ..mcp_client.servers import server_link, server_spec
from ..primitives.base import Invocation, Outcome, RunListener
from ..primitives.subprocess import seconds
from ..sandbox.site import ToolSite
from .mcp_refresh import reread_on_connect, reread_server

if TYPE_CHECKING:
    from ..harness.run import Runner

MCP_TYPES = ("mcp_tool", "mcp_server")  # a server's own run re-reads its tool list


class McpToolHandler:
    """Dispatch handler for plans of type mcp_tool and mcp_server (first in
    runner.handlers.standard_handlers; a new session re-reads its server's tools, and running
    the server itself re-reads them as an import: mcp_refresh.py).
    `pool`: the MCP client pool to run on, shared with what else reaches the servers (an
    MCP server's imports); by default its own."""

    name = "mcp"

    def __init__(self, pool: McpPool | None = None) -> None:
        self.pool = pool or McpPool()
        # Resolved server specs per (environment, chain): every element's content_hash pins
        # the merged config, and the runner's environment does not change under it.
        # (The environment is held with its spec, so its id cannot be reused while cached.)
        self._specs: dict[tuple[Any, ...], tuple[Mapping[str, str], ServerSpec]] = {}
        self.oauth = OAuthSessions()  # config.auth: the calling user's OAuth (runner/mcp_client/oauth/)

    def _spec(self, plan: Plan, environ: Mapping[str, str], site: ToolSite | None = None) -> ServerSpec:
        key = (id(environ), id(site.sandbox) if site else None, *(link.content_hash for link in plan.chain))
        cached = self._specs.get(key)
        if cached is not None and cached[0] is environ:
            return cached[1]
        if len(self._specs) >= 1024:
            self._specs.clear()
        spec = server_spec(plan, environ, site)
        self._specs[key] = (environ, spec)
        return spec

    def spec_of(self, runner: Runner, plan: Plan) -> ServerSpec:
        """The server connection a run of `plan` by `runner` uses (its sandbox and variables
        as the run has them): what names its session in the pool."""
        environ = runner.environ_for(plan)
        return self._spec(plan, environ, runner.site(plan, None, environ))

    def accepts(self, plan: Plan) -> bool:
        return plan.tool_type in MCP_TYPES

    async def run(self, invocation: Invocation) -> Outcome:
        plan, config = invocation.plan, invocation.config
        own = self._spec(plan, invocation.environ, invocation.site)
        spec = self.oauth.apply(own, config, invocation.environ, invocation.registry, invocation.runner_environ)
        if plan.tool_type == "mcp_server":  # running a server re-reads its tools (a schedule of it)
            return await reread_server(self.pool, spec, invocation)
        how = _call_of(plan)  # the plan's own: worked out once per (cached) plan
        name = how.name
        session = self.pool.session_for(spec.key)
        fresh = session is None or not session.usable  # this call connects: the tool list is re-read first
        reread = await reread_on_connect(self.pool, spec, invocation, name) if fresh else []
        detail: dict[str, Any] = {"server": spec.ref, "tool": name, "transport": spec.transport}
        try:
            result, facts = await self.pool.call_tool(
                spec,
                name,
                dict(invocation.params),
                timeout_s=how.timeout_s,
                retries=how.retries,
                repeatable=how.repeatable,
                on_progress=_forwarded(invocation.listener),
            )
        except CallTimedOut as exc:
            return Outcome(status="timeout", error=exc.message, detail=detail)
        except MCPError as exc:  # the server answered the request with a protocol error
            return Outcome(status="error", error=f"{spec.ref}: {name}: {exc.message}", detail=detail)
        if fresh and "connect_ms" not in facts and (opened := self.pool.session_for(spec.key)) is not None:
            facts["connect_ms"] = opened.connect_ms  # connected by the re-read, for this call
        if reread:  # a new session's tool list had changes (mcp_refresh.py): the run says so
            facts["warnings"] = reread
        return to_outcome(result, {**detail, **facts})

    async def aclose(self) -> None:
        await self.pool.aclose()


@dataclass(frozen=True)
class _CallOf:
    """How a plan's tool is called: its upstream name, time limit, retries, and whether a call
    cut off mid-flight may be sent again. A plan's config never changes, so a cached plan's is
    worked out once (a config that is wrong raises every time, as nothing is kept for it)."""

    name: str
    timeout_s: float
    retries: int
    repeatable: bool


def _checked_call(plan: Plan) -> _CallOf:
    name = upstream_name(plan)
    timeout_s = seconds(plan.config, "timeout", DEFAULT_CALL_TIMEOUT_S, plan.tool_id)
    retries = plan.config.get("retries", DEFAULT_RETRIES)
    if isinstance(retries, bool) or not isinstance(retries, int) or retries < 0:
        raise ConfigError(f"{plan.tool_id}: config.retries must be a whole number >= 0, not {retries!r}")
    return _CallOf(name, timeout_s, retries, repeatable(plan))


_call_of = ByIdentity(_checked_call)


def _forwarded(listener: RunListener | None) -> ProgressFnT | None:
    """The server's progress notifications for the call, passed on to whoever follows the run."""
    heard = listener.progress if listener is not None else None
    if heard is None:
        return None

    async def forward(progress: float, total: float | None, message: str | None) -> None:
        heard(message, progress, total)

    return forward


def to_outcome(result: types.CallToolResult, detail: dict[str, Any]) -> Outcome:
    """Structured content when the tool gave some, else its text (content blocks as JSON when
    they are not all text). A tool error (isError) is status "error" with its text."""
    texts = [c.text for c in result.content if isinstance(c, types.TextContent)]
    if result.is_error:
        return Outcome(status="error", error="\n".join(texts) or "the MCP tool reported an error", detail=detail)
    if result.structured_content is not None:
        output: Any = result.structured_content
    elif len(texts) == len(result.content):
        output = "\n".join(texts)
    else:
        output = [c.model_dump(mode="json", by_alias=True, exclude_none=True) for c in result.content]
    return Outcome(status="success", output=output, detail=detail)


def repeatable(plan: Plan) -> bool:
    """Whether a call cut off mid-flight may be sent again: config.idempotent when the tool
    sets it, else what the upstream tool declares (readOnlyHint or idempotentHint)."""
    config = plan.config
    explicit = config.get("idempotent")
    if explicit is not None:
        if not isinstance(explicit, bool):
            raise ConfigError(f"{plan.tool_id}: config.idempotent must be true or false, not {explicit!r}")
        return explicit
    hints = config.get("annotations")
    return isinstance(hints, dict) and (hints.get("readOnlyHint") is True or hints.get("idempotentHint") is True)


def upstream_name(plan: Plan) -> str:
    """config.tool, else the tool id after `<server>.`."""
    named = plan.config.get("tool")
    if isinstance(named, str) and named:
        return named
    server = server_link(plan).tool_id.rsplit("/", 1)[-1]
    own = plan.tool_id.rsplit("/", 1)[-1]
    if own.startswith(server + ".") and len(own) > len(server) + 1:
        return own[len(server) + 1 :]
    raise ConfigError(
        f"{plan.tool_id}: cannot tell which tool of {server} it is",
        hint=f"name it {server}.<tool>, or set config.tool",
    )
