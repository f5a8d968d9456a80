"""What the meta-tools share, in one small value: the runner, the registry, the MCP client
pool, this server's session and its choices. A value rather than closures so each meta-tool can live, and be
tested, on its own."""

from __future__ import annotations

import uuid
from collections.abc import Awaitable, Callable
from dataclasses import dataclass
from types import EllipsisType
from typing import Any

from mcp.server.context import ServerRequestContext
from mcp.server.mcpserver import Context
from mcp.server.streamable_http import MCP_SESSION_ID_HEADER

from ...harness.run import Runner
from ...mcp_client.pool import McpPool
from ...registry.base import Registry
from ...search.combined import search_embedder
from ...search.embedders import Embedder

__all__ = ["Deleter", "ServerState", "default_deleter", "session_of", "session_of_request"]

Deleter = Callable[[str], Awaitable[dict[str, Any]]]
"""Removes a tool and all its versions: `public.delete_tool(p_tool_id)`; returns its answer."""


def default_deleter(registry: Registry) -> Deleter:
    """`public.delete_tool` through the registry, so the database's errors become KiwiErrors."""
    return registry.delete_tool


@dataclass(frozen=True)
class ServerState:
    """One Kiwi MCP server's state: what `build_server` was given, resolved to its defaults."""

    runner: Runner
    registry: Registry
    server_session: str
    deleter: Deleter
    run_timeout_s: float | None = 900.0
    allow_command_writes: bool = False
    mcp_pool: McpPool | None = None
    """The pool the runner's mcp_tool handler runs on, so an import's sessions are the ones its
    tools then run on; None: this server cannot reach MCP servers (no import)."""
    embedder: Embedder | None = None
    """What embeds `search` queries in this process (KIWI_EMBEDDINGS; made once per server, its
    model loaded at the first search); None: search by words only."""

    @classmethod
    def of(
        cls,
        runner: Runner,
        registry: Registry | None = None,
        *,
        delete: Deleter | None = None,
        run_timeout_s: float | None = 900.0,
        session_id: str | None = None,
        allow_command_writes: bool = False,
        mcp_pool: McpPool | None = None,
        embedder: Embedder | EllipsisType | None = ...,
    ) -> ServerState:
        """The state `build_server` makes from its arguments (the same names and defaults);
        `embedder` by default the one the runner's settings name."""
        reg = registry if registry is not None else runner.registry
        return cls(
            runner=runner,
            registry=reg,
            server_session=session_id or f"mcp-{uuid.uuid4()}",
            deleter=delete if delete is not None else default_deleter(reg),
            run_timeout_s=run_timeout_s,
            allow_command_writes=allow_command_writes,
            mcp_pool=mcp_pool,
            embedder=search_embedder(runner.settings) if embedder is ... else embedder,
        )


def session_of(ctx: Context | None, server_session: str) -> str:
    """The session a call is audited and rate-limited in: each client connection's own over
    streamable HTTP (where many callers share one server), else the server's (stdio: one client;
    the sessionless HTTP of protocol 2026-07-28, whose requests carry no session id)."""
    try:  # the id the transport gave the connection, which it checked before routing the request here
        headers = ctx.headers if ctx is not None else None
    except (AttributeError, ValueError, LookupError):  # outside a request (in-memory tests call it directly)
        headers = None
    return _named(headers, server_session)


def session_of_request(request: ServerRequestContext[Any, Any] | None, server_session: str) -> str:
    """session_of for a request the low-level server handles (a task-augmented tools/call)."""
    headers = getattr(request.request, "headers", None) if request is not None else None
    return _named(headers, server_session)


def _named(headers: Any, server_session: str) -> str:
    try:
        transport = headers.get(MCP_SESSION_ID_HEADER) if headers is not None else None
    except (AttributeError, ValueError, LookupError):
        transport = None
    return f"{server_session}/{transport}"[:200] if transport else server_session
