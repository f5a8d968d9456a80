"""How a plan's MCP server is reached: the chain's mcp_server link, and its connection,
resolved from the merged config into a `ServerSpec` the pool (pool.py) starts or connects.

The config holds the server's connection (stdio: command, args, env, env_passthrough, cwd;
remote: url, headers) and the startup and idle limits. The command and its environment are
built exactly as the subprocess primitive builds them, with `${VAR}`s from the runner's
environment and no `{placeholders}` at all: nothing from a request reaches the command.
Used by the mcp_tool handler (runner/handlers/mcp_tool.py) and by imports (importer.py).
"""

from __future__ import annotations

import hashlib
import json
import os
from collections.abc import Mapping
from functools import lru_cache
from pathlib import Path
from typing import Any

from ..core.expand import as_text, expand_vars
from ..core.plan import ChainLink, Plan
from ..errors import ConfigError, Refused
from ..primitives.subprocess import (
    DEFAULT_PATH,
    command_argv,
    command_environment,
    positive_number,
    resolve_command,
    seconds,
)
from ..sandbox.site import ToolSite
from .pool import DEFAULT_IDLE_SHUTDOWN_S, DEFAULT_STARTUP_TIMEOUT_S, ServerSpec, Transport

__all__ = ["server_link", "server_spec"]

_TRANSPORTS: dict[str, Transport] = {
    "stdio": "stdio",
    "streamable_http": "streamable_http",
    "streamable-http": "streamable_http",
    "http": "streamable_http",
    "sse": "sse",
    "websocket": "websocket",
    "ws": "websocket",
}
_SCHEMES = {"websocket": ("ws://", "wss://")}  # any other remote transport: http(s)


def server_link(plan: Plan) -> ChainLink:
    link = plan.mcp_server_link
    if link is None:
        raise Refused(f"{plan.tool_id}: its chain has no mcp_server", hint="an mcp_tool's executor is an mcp_server")
    return link


def server_spec(plan: Plan, environ: Mapping[str, str], site: ToolSite | None = None) -> ServerSpec:
    """The plan's server connection, resolved. Works on an mcp_tool plan and on the
    mcp_server's own plan (what `kiwi mcp import` uses). With a confined `site`, a stdio
    server starts in its sandbox (the plan's profile), in the runner's working directory."""
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
        if site is not None and site.confined:
            inside = cwd or os.getcwd()
            fields["confiner"] = lambda: site.confine_server(inside)
    else:
        url = config.get("url")
        if not isinstance(url, str) or not url:
            raise ConfigError(f"{ref}: a {transport} MCP server needs config.url")
        url = expand_vars(url, environ)
        schemes = _SCHEMES.get(transport, ("http://", "https://"))
        if not url.startswith(schemes):
            raise ConfigError(
                f"{ref}: config.url of a {transport} MCP server must start {' or '.join(schemes)}, not {url!r}"
            )
        headers = config.get("headers") or {}
        if not isinstance(headers, dict):
            raise ConfigError(f"{ref}: config.headers must be a mapping")
        expanded = {str(k): expand_vars(as_text(v), environ) for k, v in headers.items() if v is not None}
        fields.update(url=url, headers=_with_bearer(expanded, config.get("auth"), environ))
    shown = {k: v for k, v in fields.items() if k != "confiner"}
    if "confiner" in fields:  # a sandboxed server is another session than the same one unsandboxed
        shown["sandbox"] = site.profile.describe() if site is not None else None
    fingerprint = hashlib.sha256(json.dumps(shown, sort_keys=True, default=list).encode()).hexdigest()[:16]
    return ServerSpec(
        ref=ref,
        key=f"{ref}@{link.version}#{link.content_hash[:16]}:{fingerprint}",
        startup_timeout_s=seconds(config, "startup_timeout", DEFAULT_STARTUP_TIMEOUT_S, ref),
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
            hint="config.transport is stdio (command, args, env), or streamable_http, sse or websocket (url, headers)",
        )
    return transport


def _with_bearer(headers: dict[str, str], auth: Any, environ: Mapping[str, str]) -> dict[str, str]:
    """A remote server's `auth: {type: bearer, token: ${VAR}}` as its Authorization header
    (unless its headers name one); an empty token sends none. OAuth is oauth/'s."""
    if not isinstance(auth, Mapping) or auth.get("type") != "bearer":
        return headers
    token = expand_vars(as_text(auth.get("token") or ""), environ)
    if token and not any(k.lower() == "authorization" for k in headers):
        headers["Authorization"] = f"Bearer {token}"
    return headers


def _cwd(config: Mapping[str, Any], environ: Mapping[str, str]) -> str | None:
    raw = config.get("cwd")
    if raw in (None, ""):
        return None
    path = Path(expand_vars(str(raw), environ)).expanduser()
    if not path.is_dir():
        raise ConfigError(f"config.cwd is not a directory: {path}")
    return str(path)
