"""The MCP `logging` capability of Kiwi's server: `logging/setLevel` chooses, for one client
connection, the least severe level of the log notifications it is sent (notify_run.py sends a
run's stderr lines as log notifications, each at its level).

    install(server)               # advertises `logging`, answers logging/setLevel with {}
    allows(request_context, lvl)  # may a notification at `lvl` go to this request's client?

On the handshake protocol versions (2025-*) the level is the connection's: set once by
`logging/setLevel`, "info" until then. On 2026-07-28, which has no setLevel, each request
opts in with its own `_meta` level and the SDK's rule (allowed_log_levels) decides alone.
"""

from __future__ import annotations

from typing import Any, get_args

from mcp.server.connection import MODERN_PROTOCOL_VERSIONS, allowed_log_levels
from mcp.server.context import ServerRequestContext
from mcp.server.mcpserver import MCPServer
from mcp_types import EmptyResult, LoggingLevel, SetLevelRequestParams

__all__ = ["DEFAULT_LEVEL", "LEVELS", "allows", "install", "level_of"]

LEVELS: tuple[LoggingLevel, ...] = get_args(LoggingLevel)  # least severe first (RFC 5424)
DEFAULT_LEVEL: LoggingLevel = "info"
_STATE_KEY = "kiwi.log_level"


def install(server: MCPServer) -> None:
    """Serve `logging/setLevel` on `server`, which makes the SDK advertise the `logging`
    capability. MCPServer has no public way to add a request handler, so it goes on the
    low-level server it wraps (as MCPServer's own extensions do)."""
    server._lowlevel_server.add_request_handler("logging/setLevel", SetLevelRequestParams, _set_level)


async def _set_level(ctx: ServerRequestContext[Any, Any], params: SetLevelRequestParams) -> EmptyResult:
    """The level, for every later request of this connection; answered with `{}`."""
    state = _connection_state(ctx)
    if state is not None:
        state[_STATE_KEY] = params.level
    return EmptyResult()


def level_of(ctx: ServerRequestContext[Any, Any]) -> LoggingLevel:
    """The connection's level: what its client last set, else DEFAULT_LEVEL."""
    state = _connection_state(ctx)
    level = state.get(_STATE_KEY) if state is not None else None
    return level if level in LEVELS else DEFAULT_LEVEL


def allows(ctx: ServerRequestContext[Any, Any], level: LoggingLevel) -> bool:
    """Whether a log notification at `level` may be sent for the request of `ctx`."""
    if level not in allowed_log_levels(ctx.protocol_version, ctx.meta):
        return False  # 2026-07-28: this request did not opt in at that level
    if ctx.protocol_version in MODERN_PROTOCOL_VERSIONS:
        return True
    return LEVELS.index(level) >= LEVELS.index(level_of(ctx))


def _connection_state(ctx: ServerRequestContext[Any, Any]) -> dict[str, Any] | None:
    """The per-connection scratch state the SDK keeps (`Connection.state`, which lasts across the
    connection's requests). A request's ServerSession is made per request and holds its
    connection, which the request context does not expose otherwise."""
    connection = getattr(ctx.session, "_connection", None)
    state = getattr(connection, "state", None)
    return state if isinstance(state, dict) else None
