"""Runs `mcp_tool` plans through the session pool.

The plan alone decides everything: its chain names the `mcp_server` (the link whose
type is mcp_server), and its merged config holds the server's connection (stdio:
command, args, env, env_passthrough, cwd; remote: url, headers), the primitive's
defaults, and the tool's own keys (`tool`: the upstream name, `timeout_s`, `retries`,
`idempotent`; `annotations`: the upstream tool's MCP annotations, as imported).
The command and its environment are built exactly as the subprocess primitive builds
them, with `${VAR}`s from the runner's environment and no `{placeholders}` at all: a
request's parameters only ever become the tool call's arguments.
"""

from __future__ import annotations

import hashlib
import json
from collections.abc import Mapping
from functools import lru_cache
from pathlib import Path
from typing import Any

import mcp_types as types
from mcp.shared.exceptions import MCPError

from ..core.expand import as_text, expand_vars
from ..core.plan import ChainLink, Plan
from ..errors import ConfigError, Refused
from ..harness.dispatch import Dispatcher, LazyPrimitive
from ..mcp.pool import (
    DEFAULT_CALL_TIMEOUT_S,
    DEFAULT_IDLE_SHUTDOWN_S,
    DEFAULT_RETRIES,
    DEFAULT_STARTUP_TIMEOUT_S,
    CallTimedOut,
    McpPool,
    ServerSpec,
    Transport,
)
from ..primitives.base import Invocation, Outcome
from ..primitives.subprocess import DEFAULT_PATH, command_argv, command_environment, positive_number, resolve_command

_TRANSPORTS: dict[str, Transport] = {
    "stdio": "stdio",
    "streamable_http": "streamable_http",
    "streamable-http": "streamable_http",
    "http": "streamable_http",
    "sse": "sse",
}


class McpToolHandler:
    """Dispatch handler for plans of type mcp_tool: `Dispatcher.add_first(McpToolHandler())`."""

    name = "mcp"

    def __init__(self, pool: McpPool | None = None) -> None:
        self.pool = pool or McpPool()
        # Resolved server specs per (environment, chain): every element's content_hash pins
        # the merged config, and the runner's environment does not change under it.
        # (The environment is held with its spec, so its id cannot be reused while cached.)
        self._specs: dict[tuple[Any, ...], tuple[Mapping[str, str], ServerSpec]] = {}

    def _spec(self, plan: Plan, environ: Mapping[str, str]) -> ServerSpec:
        key = (id(environ), *(link.content_hash for link in plan.chain))
        cached = self._specs.get(key)
        if cached is not None and cached[0] is environ:
            return cached[1]
        if len(self._specs) >= 1024:
            self._specs.clear()
        spec = server_spec(plan, environ)
        self._specs[key] = (environ, spec)
        return spec

    def accepts(self, plan: Plan) -> bool:
        return plan.tool_type == "mcp_tool"

    async def run(self, invocation: Invocation) -> Outcome:
        plan, config = invocation.plan, invocation.config
        spec = self._spec(plan, invocation.environ)
        name = upstream_name(plan)
        timeout_s = positive_number(config, "timeout_s", DEFAULT_CALL_TIMEOUT_S, plan.tool_id)
        retries = config.get("retries", DEFAULT_RETRIES)
        if isinstance(retries, bool) or not isinstance(retries, int) or retries < 0:
            raise ConfigError(f"{plan.tool_id}: config.retries must be a whole number >= 0, not {retries!r}")
        detail: dict[str, Any] = {"server": spec.ref, "tool": name, "transport": spec.transport}
        try:
            result, facts = await self.pool.call_tool(
                spec, name, dict(invocation.params), timeout_s=timeout_s, retries=retries, repeatable=repeatable(plan)
            )
        except CallTimedOut as exc:
            return Outcome(status="timeout", error=exc.message, detail=detail)
        except MCPError as exc:  # the server answered the request with a protocol error
            return Outcome(status="error", error=f"{spec.ref}: {name}: {exc.message}", detail=detail)
        return to_outcome(result, {**detail, **facts})

    async def aclose(self) -> None:
        await self.pool.aclose()


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


def server_link(plan: Plan) -> ChainLink:
    link = plan.mcp_server_link
    if link is None:
        raise Refused(f"{plan.tool_id}: its chain has no mcp_server", hint="an mcp_tool's executor is an mcp_server")
    return link


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


def server_spec(plan: Plan, environ: Mapping[str, str]) -> ServerSpec:
    """The plan's server connection, resolved. Works on an mcp_tool plan and on the
    mcp_server's own plan (what `kiwi mcp import` uses)."""
    link = server_link(plan)
    config, ref = plan.config, link.tool_id
    transport = _transport(config, ref)
    fields: dict[str, Any] = {"transport": transport}
    if transport == "stdio":
        no_values: dict[str, Any] = {}  # no {placeholders}: nothing from a request reaches the command
        env = command_environment(config, environ, no_values, tool_id=ref)
        cwd = _cwd(config, environ)
        argv = command_argv(config, environ, no_values, tool_id=ref)
        argv[0] = _resolved(argv[0], env.get("PATH") or DEFAULT_PATH, cwd)
        fields.update(argv=tuple(argv), env=env, cwd=cwd)
    else:
        url = config.get("url")
        if not isinstance(url, str) or not url:
            raise ConfigError(f"{ref}: a {transport} MCP server needs config.url")
        url = expand_vars(url, environ)
        if not url.startswith(("http://", "https://")):
            raise ConfigError(f"{ref}: config.url must be an http(s) URL, not {url!r}")
        headers = config.get("headers") or {}
        if not isinstance(headers, dict):
            raise ConfigError(f"{ref}: config.headers must be a mapping")
        fields.update(
            url=url,
            headers={str(k): expand_vars(as_text(v), environ) for k, v in headers.items() if v is not None},
        )
    fingerprint = hashlib.sha256(json.dumps(fields, sort_keys=True, default=list).encode()).hexdigest()[:16]
    return ServerSpec(
        ref=ref,
        key=f"{ref}@{link.version}#{link.content_hash[:16]}:{fingerprint}",
        startup_timeout_s=positive_number(config, "startup_timeout_s", DEFAULT_STARTUP_TIMEOUT_S, ref),
        idle_shutdown_s=positive_number(config, "idle_shutdown_s", DEFAULT_IDLE_SHUTDOWN_S, ref),
        **fields,
    )


@lru_cache(maxsize=256)
def _resolved(command: str, path: str, cwd: str | None) -> str:
    """resolve_command, remembered: a lookup on PATH per call would cost more than the call."""
    return resolve_command(command, path, Path(cwd) if cwd else None)


def _transport(config: Mapping[str, Any], ref: str) -> Transport:
    raw = config.get("transport")
    if raw is None:
        raw = "stdio" if config.get("command") else "streamable_http" if config.get("url") else None
    transport = _TRANSPORTS.get(str(raw).lower()) if raw is not None else None
    if transport is None:
        raise ConfigError(
            f"{ref}: unknown MCP transport {raw!r}",
            hint="config.transport is stdio (command, args, env) or streamable_http / sse (url, headers)",
        )
    return transport


def _cwd(config: Mapping[str, Any], environ: Mapping[str, str]) -> str | None:
    raw = config.get("cwd")
    if raw in (None, ""):
        return None
    path = Path(expand_vars(str(raw), environ)).expanduser()
    if not path.is_dir():
        raise ConfigError(f"config.cwd is not a directory: {path}")
    return str(path)


def mcp_handler_of(dispatcher: Dispatcher) -> McpToolHandler:
    """The McpToolHandler that runs `dispatcher`'s mcp_tool plans (created if still lazy), so
    what uses MCP servers outside a run (an import) shares the pool the runs use."""
    for handler in dispatcher.handlers:
        if isinstance(handler, LazyPrimitive) and handler.name == McpToolHandler.name:
            handler = handler.instance()
        if isinstance(handler, McpToolHandler):
            return handler
    raise ConfigError(
        "this runner has no MCP handler, so it cannot reach MCP servers",
        hint="use the default dispatcher, or add an McpToolHandler to it",
    )
