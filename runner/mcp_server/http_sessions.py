"""The HTTP endpoint's MCP sessions: each closes when left idle, and each caller holds a few.

A client that sends `initialize` and never `DELETE` leaves a session (its streams, its
server task, ~30 KB) behind; 3,000 of them added 100 MB to a server that never freed it.

* **Idle sessions expire.** A session with no request in flight (no call being served, no
  open GET stream) for `idle_s` seconds is closed and forgotten; its id then answers 404,
  and the client opens another, as the specification says (the SDK's own idle timeout,
  given Kiwi's setting: KIWI_SESSION_IDLE_TIMEOUT, default 600 s).
* **A caller holds at most `per_user` live sessions** (KIWI_MAX_SESSIONS_PER_USER, default
  64): a user by their id; the anonymous callers, the service role, and the server's own
  principal (`--insecure-no-auth`) one caller each. At the cap, a new session makes room by
  closing the caller's session idle the longest (as its idle timeout would have, earlier);
  when none is idle, every one busy, the new one is refused: HTTP 429 with a JSON-RPC error
  naming the cap. A caller only ever closes its own sessions.

* **Their memory goes back to the system.** Python keeps memory it freed for reuse, and
  sessions that ended leave it scattered: a few seconds after sessions end, a full garbage
  collection and glibc's `malloc_trim` give it back (once per TRIM_AFTER_S at most). With
  CPython's own small-object allocator most of it stays pinned by the few objects that
  outlive a burst, so `kiwi serve --transport http` runs under PYTHONMALLOC=malloc
  (runner/cli/serve.py), where the trim returns nearly all of it.

The sessions themselves are the SDK's (StreamableHTTPSessionManager); this subclass decides
admission, at the one place the SDK admits a session (`_admit_session`, under its creation
lock), and learns of each session's end where the SDK forgets it (`_discard_session`).
"""

from __future__ import annotations

import asyncio
import contextlib
import contextvars
import ctypes
import gc
import logging
import math
import platform
from collections.abc import AsyncIterator
from dataclasses import dataclass
from typing import Any

from mcp.server.auth.middleware.bearer_auth import AuthenticatedUser, AuthorizationContext
from mcp.server.mcpserver import MCPServer
from mcp.server.streamable_http import MCP_SESSION_ID_HEADER, StreamableHTTPServerTransport
from mcp.server.streamable_http_manager import StreamableHTTPASGIApp, StreamableHTTPSessionManager
from mcp.server.transport_security import TransportSecuritySettings
from mcp_types import INVALID_REQUEST
from starlette.applications import Starlette
from starlette.datastructures import Headers
from starlette.responses import JSONResponse
from starlette.routing import Route
from starlette.types import Receive, Scope, Send

from ..principal import forget_verified_tokens

__all__ = ["CappedSessionManager", "SessionLimits", "caller_of", "sessions_app"]

logger = logging.getLogger("kiwi.mcp.serve")

SERVER = "server"
"""The caller of every request when the endpoint serves without tokens (--insecure-no-auth)."""

TRIM_AFTER_S = 5.0
"""How long after a session ends its memory is given back (sessions ending meanwhile join in)."""

_caller: contextvars.ContextVar[str] = contextvars.ContextVar("kiwi_session_caller", default=SERVER)


@dataclass(frozen=True)
class SessionLimits:
    """How long an unused session lives, and how many live sessions one caller may hold."""

    idle_s: float
    per_user: int

    def __post_init__(self) -> None:
        if not (math.isfinite(self.idle_s) and self.idle_s > 0) or self.per_user < 1:
            raise ValueError(f"session limits must be positive: {self}")


def caller_of(scope: Scope) -> str:
    """Whose sessions a request's count toward: the verified token's user (by id), else its
    role (anon, service_role: one caller each), else the server's own principal."""
    user = scope.get("user")
    token = user.access_token if isinstance(user, AuthenticatedUser) else None
    principal = getattr(token, "principal", None)
    if principal is None:
        return SERVER
    return f"user {principal.user_id}" if principal.user_id else str(principal.role)


class SessionCapReached(Exception):
    """A caller already holds its cap of live sessions, none of them idle."""

    def __init__(self, caller: str, cap: int) -> None:
        super().__init__(f"{caller} holds {cap} live MCP sessions")
        self.caller = caller
        self.cap = cap

    def response(self) -> JSONResponse:
        message = (
            f"Too many sessions: this caller already holds {self.cap} live MCP sessions, the most one caller "
            "may hold (KIWI_MAX_SESSIONS_PER_USER), and none is idle; end one (HTTP DELETE with its "
            "Mcp-Session-Id) or wait until one ends"
        )
        error = {"code": INVALID_REQUEST, "message": message, "data": {"max_sessions_per_user": self.cap}}
        return JSONResponse({"jsonrpc": "2.0", "id": None, "error": error}, status_code=429)


class CappedSessionManager(StreamableHTTPSessionManager):
    """The SDK's session manager with idle sessions expiring and a cap of live sessions per caller."""

    def __init__(self, app: Any, *, limits: SessionLimits, session_prefix: str = "", **options: Any) -> None:
        super().__init__(app, session_idle_timeout=limits.idle_s, **options)
        self.limits = limits
        self.session_prefix = session_prefix  # names this process in its ids, with several (http_routing.py)
        self._held: dict[str, dict[str, StreamableHTTPServerTransport]] = {}  # caller -> session id -> transport
        self._holder: dict[str, str] = {}  # session id -> caller
        self._trim: asyncio.TimerHandle | None = None

    def live_sessions(self, caller: str | None = None) -> int:
        """How many sessions are open (of `caller`, or of everyone): for tests and diagnostics."""
        if caller is None:
            return len(self._holder)
        return len(self._held.get(caller, {}))

    async def _handle_stateful_request(self, scope: Scope, receive: Receive, send: Send) -> None:
        if MCP_SESSION_ID_HEADER in Headers(scope=scope):  # an existing session: nothing to admit
            await super()._handle_stateful_request(scope, receive, send)
            return
        reset = _caller.set(caller_of(scope))
        try:
            await super()._handle_stateful_request(scope, receive, send)
        except SessionCapReached as refused:  # raised by _admit_session before anything was sent
            logger.warning("refused a new MCP session: %s", refused)
            await refused.response()(scope, receive, send)
        finally:
            _caller.reset(reset)

    def _admit_session(self, requestor: AuthorizationContext | None) -> StreamableHTTPServerTransport | None:
        """The SDK's admission (under its creation lock, no await), once the caller has room: at
        its cap, its session idle the longest is closed, or the new one refused."""
        caller = _caller.get()
        for ended in [sid for sid, t in self._held.get(caller, {}).items() if t.is_terminated]:
            self._forget(ended)  # ended by its client (DELETE) just now: the SDK forgets it next
        held = self._held.get(caller, {})
        if len(held) >= self.limits.per_user:
            self._make_room(caller, held)
        transport = super()._admit_session(requestor)
        if transport is not None and self.session_prefix:
            self._rename(transport)
        if transport is not None and transport.mcp_session_id is not None:
            self._held.setdefault(caller, {})[transport.mcp_session_id] = transport
            self._holder[transport.mcp_session_id] = caller
        return transport

    def _rename(self, transport: StreamableHTTPServerTransport) -> None:
        """Give a session just admitted (nothing sent yet) an id that names this process."""
        old = transport.mcp_session_id
        assert old is not None
        new = self.session_prefix + old
        transport.mcp_session_id = new
        self._server_instances[new] = self._server_instances.pop(old)
        if old in self._session_owners:
            self._session_owners[new] = self._session_owners.pop(old)

    def _make_room(self, caller: str, held: dict[str, StreamableHTTPServerTransport]) -> None:
        """Close the caller's session idle the longest (its idle scope's deadline is the soonest:
        the SDK sets it when the session's last request ends, and to infinity while one is in
        flight), as its idle timeout would have; SessionCapReached if every one is busy."""
        idle = [(deadline, sid, t) for sid, t in held.items() if (deadline := _idle_until(t)) is not None]
        if not idle:
            raise SessionCapReached(caller, self.limits.per_user)
        _, session_id, transport = min(idle, key=lambda found: found[0])
        assert transport.idle_scope is not None
        transport.idle_scope.cancel()  # its session ends as an expired one does, and is discarded
        self._forget(session_id)
        logger.info("closed MCP session %s, idle the longest, to open another for %s", session_id, caller)

    async def _discard_session(self, session_id: str, transport: StreamableHTTPServerTransport) -> None:
        self._forget(session_id)
        await super()._discard_session(session_id, transport)
        if self._trim is None and _malloc_trim is not None:
            self._trim = asyncio.get_running_loop().call_later(TRIM_AFTER_S, self._give_back)

    def _give_back(self) -> None:
        """Free what ended sessions left in reference cycles, and return freed memory to the system."""
        self._trim = None
        forget_verified_tokens()  # a burst of callers' tokens, kept scattered through the heap
        gc.collect()
        if _malloc_trim is not None:
            _malloc_trim(0)

    def _forget(self, session_id: str) -> None:
        caller = self._holder.pop(session_id, None)
        if caller is None:
            return
        held = self._held.get(caller)
        if held is not None:
            held.pop(session_id, None)
            if not held:
                del self._held[caller]


def _libc_malloc_trim() -> Any:
    """glibc's malloc_trim, which returns the free memory inside the heap too (None elsewhere)."""
    if platform.system() != "Linux" or platform.libc_ver()[0] != "glibc":
        return None
    try:
        return ctypes.CDLL(None).malloc_trim
    except (OSError, AttributeError):
        return None


_malloc_trim = _libc_malloc_trim()


def _idle_until(transport: StreamableHTTPServerTransport) -> float | None:
    """When the session expires if it is idle: no request in flight and not already ending (its
    idle scope counting down); else None."""
    scope = transport.idle_scope
    if scope is None or scope.cancel_called or not math.isfinite(scope.deadline):
        return None
    return scope.deadline


def sessions_app(
    server: MCPServer,
    *,
    path: str,
    limits: SessionLimits,
    transport_security: TransportSecuritySettings | None,
    session_prefix: str = "",
) -> Starlette:
    """The streamable HTTP app of `server` at `path`, as `server.streamable_http_app()` makes it
    but with Kiwi's session manager (the SDK's app takes no manager of another class)."""
    manager = CappedSessionManager(
        server._lowlevel_server,  # what streamable_http_app() gives the SDK's own manager
        limits=limits,
        session_prefix=session_prefix,
        security_settings=transport_security,
    )

    @contextlib.asynccontextmanager
    async def lifespan(app: Starlette) -> AsyncIterator[None]:
        async with manager.run():
            yield

    app = Starlette(routes=[Route(path, endpoint=StreamableHTTPASGIApp(manager))], lifespan=lifespan)
    app.state.session_manager = manager
    return app
