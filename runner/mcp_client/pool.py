"""MCP client sessions held open between calls: one long-lived session per server.

* A session opens on first use and is shared by every concurrent call to its server
  (the SDK's ClientSession multiplexes requests by id).
* Its transport and ClientSession context managers are entered and left by one
  background task (anyio requires a task group to be closed by the task that opened
  it); callers only send requests on the session.
* Startup is bounded (config `startup_timeout`), each call too (`timeout_s`); a session left
  unused for `idle_shutdown_s` closes itself: only one nobody holds (a call holds its session
  from when the pool picks it, even while it starts), so none closes under a call.
* A dead connection discards the session. A call that provably did not reach the
  server goes to a new session, retried at most `retries` times: its connection had
  already ended (the transport's read stream reached its end), the remote server could
  not be connected to, or it no longer knew the session (it restarted: a 404, or a 400
  to a request that carried the session id). A call whose connection closed after it was
  sent may have run: it is retried only when the caller says the tool is repeatable
  (the handler reads that from its config and its MCP annotations), otherwise it fails
  saying so. A tool's own error and a call that timed out are never retried.
* `aclose()` ends every session; for stdio servers an atexit hook and a SIGTERM/SIGHUP
  handler (installed only where the default action would apply) kill what is left, so no
  server survives Kiwi.

Keys are opaque to the pool: the handler makes them from the server's reference, its
content hash and its resolved connection config, so a republished server gets a new
session.
"""

from __future__ import annotations

import asyncio
import atexit
import contextlib
import json
import logging
import os
import signal
import tempfile
import threading
import time
from collections.abc import AsyncIterator, Awaitable, Callable, Mapping
from dataclasses import dataclass, field
from typing import IO, Any, Literal

import anyio
import httpx2
import mcp_types as types
from mcp.client.session import ClientSession
from mcp.client.sse import sse_client
from mcp.client.streamable_http import streamable_http_client
from mcp.shared.dispatcher import ProgressFnT
from mcp.shared.exceptions import MCPError

from ..errors import PrimitiveError
from ..sandbox.confine import Confinement, network_hint
from .stdio import stdio_connection
from .websocket import websocket_client

logger = logging.getLogger("kiwi.mcp")

Transport = Literal["stdio", "streamable_http", "sse", "websocket"]
DEFAULT_STARTUP_TIMEOUT_S = 30.0
DEFAULT_IDLE_SHUTDOWN_S = 300.0
DEFAULT_CALL_TIMEOUT_S = 60.0
DEFAULT_RETRIES = 2
_BACKOFF_S = 0.05
_ERRLOG_TAIL = 2000


class ConnectionFailed(PrimitiveError):
    """A server could not be started or reached, or its connection closed."""

    kind = "mcp_connection"


class CallTimedOut(PrimitiveError):
    """A call got no answer within its timeout (not retried: the server may still be working)."""

    kind = "timeout"


@dataclass(frozen=True)
class ServerSpec:
    """How to reach one server, fully resolved (no templates left). `key` names its session."""

    ref: str
    key: str
    transport: Transport
    argv: tuple[str, ...] = ()
    env: Mapping[str, str] = field(default_factory=dict, repr=False)
    cwd: str | None = None
    url: str | None = None
    headers: Mapping[str, str] = field(default_factory=dict, repr=False)
    startup_timeout_s: float = DEFAULT_STARTUP_TIMEOUT_S
    idle_shutdown_s: float = DEFAULT_IDLE_SHUTDOWN_S
    # remote: an httpx2.Auth for every request (OAuth, runner/mcp_client/oauth/); `key` names whose it is
    auth: Any = field(default=None, compare=False, repr=False)
    # stdio: makes the server's sandbox (runner/sandbox/) when a session starts; None: unsandboxed
    confiner: Callable[[], Awaitable[Confinement | None]] | None = field(default=None, compare=False, repr=False)


# --------------------------------------------------------------------------- one session


class _Session:
    def __init__(self, spec: ServerSpec) -> None:
        self.spec = spec
        self.session: ClientSession | None = None
        self.pid: int | None = None
        self.ended = False  # the transport's read stream reached its end: nothing sent now can arrive
        self.unreached = False  # remote: a request could not be delivered (no connection, unknown session)
        self.closed = False
        self.in_flight = 0
        self.last_used = time.monotonic()
        self.connect_ms: float | None = None
        self._stop = anyio.Event()
        self._ready: asyncio.Future[None] = asyncio.get_running_loop().create_future()
        self._errlog: IO[str] | None = None
        self._confine: Confinement | None = None
        self._task = asyncio.create_task(self._own(), name=f"kiwi-mcp:{spec.ref}")
        self._deadline = asyncio.get_running_loop().call_later(spec.startup_timeout_s, self._startup_expired)

    async def ready(self) -> None:
        await asyncio.shield(self._ready)

    @property
    def usable(self) -> bool:
        """Open, and its connection has not ended."""
        return not (self.closed or self.ended)

    def _lost(self, exc: MCPError) -> _Lost | None:
        """What an MCPError says of the connection: None when the server itself answered."""
        if self.unreached and exc.code in _UNREACHED_CODES:
            self.ended = True
            return _Lost(f"the server did not take the request ({exc.message})", sent=False)
        if exc.code == types.CONNECTION_CLOSED:
            # The SDK reports a write that could not start the same way as a reply that
            # never came; only the first (a closed stream behind it) provably sent nothing.
            unsent = isinstance(exc.__context__, anyio.ClosedResourceError | anyio.BrokenResourceError)
            return _Lost(str(exc), sent=not unsent)
        return None

    def release(self) -> None:
        """A caller that held the session (the pool, from _acquire) is done: idle from now, unless held."""
        self.in_flight -= 1
        self.last_used = time.monotonic()

    async def call_tool(
        self, name: str, arguments: dict[str, Any], timeout_s: float, on_progress: ProgressFnT | None = None
    ) -> types.CallToolResult:
        if self.session is None or not self.usable:
            raise _Lost("the connection had already ended", sent=False)
        try:
            return await self.session.call_tool(
                name, arguments, read_timeout_seconds=timeout_s, progress_callback=on_progress
            )
        except (anyio.ClosedResourceError, anyio.BrokenResourceError) as exc:
            raise _Lost(f"the connection closed: {type(exc).__name__}", sent=False) from exc
        except anyio.EndOfStream as exc:
            # the streams closed under the call (the server died, or the idle shutdown won a race)
            raise _Lost(f"the connection closed: {type(exc).__name__}", sent=True) from exc
        except MCPError as exc:
            if (lost := self._lost(exc)) is not None:
                raise lost from exc
            if exc.code == types.REQUEST_TIMEOUT:
                raise CallTimedOut(
                    f"{self.spec.ref}: {name} did not answer within {timeout_s:g} s",
                    hint="raise config.timeout of the tool or its server",
                ) from exc
            raise

    async def list_tools(self, timeout_s: float) -> list[types.Tool]:
        if self.session is None or not self.usable:
            raise _Lost("the connection had already ended", sent=False)
        tools: list[types.Tool] = []
        cursor: str | None = None
        try:
            with anyio.fail_after(timeout_s):
                while True:
                    params = types.PaginatedRequestParams(cursor=cursor) if cursor else None
                    page = await self.session.list_tools(params=params)
                    tools.extend(page.tools)
                    cursor = page.next_cursor
                    if not cursor:
                        return tools
        except MCPError as exc:
            if (lost := self._lost(exc)) is not None:
                raise lost from exc  # the pool repeats tools/list whether or not it was sent
            raise
        except TimeoutError as exc:
            raise CallTimedOut(f"{self.spec.ref}: tools/list did not answer within {timeout_s:g} s") from exc

    async def aclose(self) -> None:
        self.closed = True
        self._stop.set()
        if not self._ready.done():
            self._task.cancel()
        with contextlib.suppress(asyncio.CancelledError):
            await asyncio.shield(self._task)

    # The owner task: enters the transport and the session, waits, leaves them.
    async def _own(self) -> None:
        started = time.perf_counter()
        try:
            async with contextlib.AsyncExitStack() as stack:
                read, write = await stack.enter_async_context(self._transport())
                session = await stack.enter_async_context(ClientSession(read, write))
                await session.initialize()
                self.session = session
                self.connect_ms = round((time.perf_counter() - started) * 1000, 3)
                # idle from now, not from the spawn: a server slower to start than its
                # idle_shutdown_s would otherwise close before its first call
                self.last_used = time.monotonic()
                self._deadline.cancel()
                if not self._ready.done():
                    self._ready.set_result(None)
                    await self._serve()
        except BaseException as exc:  # reported to the waiting callers, or logged
            if not self._ready.done():
                self._ready.set_exception(self._startup_error(exc))
            elif not isinstance(exc, asyncio.CancelledError | Exception):
                raise
            else:
                logger.debug("mcp session %s ended: %r", self.spec.ref, exc)
        finally:
            self.closed = True
            self._deadline.cancel()
            if self.pid is not None:
                _untrack(self.pid)
            if self._errlog is not None:
                self._errlog.close()
            if self._confine is not None:
                self._confine.release()

    async def _serve(self) -> None:
        """Until aclose() or until idle for idle_shutdown_s with nobody holding the session (no
        await between the check and the close: a later caller finds it closed, and starts another)."""
        while not self._stop.is_set():
            idle = time.monotonic() - self.last_used
            if self.in_flight == 0 and idle >= self.spec.idle_shutdown_s:
                self.closed = True  # before any await: no caller gets this session any more
                logger.debug("mcp session %s idle for %.0f s: closing", self.spec.ref, idle)
                return
            wait = self.spec.idle_shutdown_s - idle if self.in_flight == 0 else self.spec.idle_shutdown_s
            with anyio.move_on_after(max(wait, 0.01)):
                await self._stop.wait()

    @contextlib.asynccontextmanager
    async def _transport(self) -> AsyncIterator[Any]:
        spec = self.spec
        if spec.transport == "stdio":
            # The server's stderr, kept for startup errors; closed when the session ends (_own).
            self._errlog = tempfile.TemporaryFile("w+", encoding="utf-8", errors="replace")  # noqa: SIM115
            argv, env, cwd = list(spec.argv), dict(spec.env), spec.cwd
            if spec.confiner is not None:
                self._confine = await spec.confiner()
            if self._confine is not None:  # the server runs in its sandbox, its profile the plan's
                argv, env = self._confine.command(argv, env)
                cwd = None
            async with stdio_connection(argv, env, cwd, self._errlog) as server:
                self.pid = server.pid  # the command as spawned (its sandbox's, when confined)
                _track(server.pid)
                yield _WatchedReceive(server.read, self._ended), server.write
        elif spec.transport == "streamable_http":
            assert spec.url is not None
            client = httpx2.AsyncClient(
                headers=dict(spec.headers),
                timeout=httpx2.Timeout(30.0, read=300.0),
                transport=_RemoteAnswers(self._unreached),
                auth=spec.auth,
            )
            async with client, streamable_http_client(spec.url, http_client=client) as (read, write):
                yield _WatchedReceive(read, self._ended), write
        elif spec.transport == "websocket":
            async with websocket_client(spec.url or "", spec.headers, spec.startup_timeout_s, spec.auth) as (r, w):
                yield _WatchedReceive(r, self._ended), w
        else:
            assert spec.url is not None
            sse = sse_client(spec.url, headers=dict(spec.headers), timeout=spec.startup_timeout_s, auth=spec.auth)
            async with sse as (read, write):
                yield _WatchedReceive(read, self._ended), write

    def _ended(self) -> None:
        self.ended = True

    def _unreached(self) -> None:
        self.unreached = True

    def _startup_expired(self) -> None:
        if not self._ready.done():
            self._ready.set_exception(
                ConnectionFailed(
                    f"MCP server {self.spec.ref} did not start within {self.spec.startup_timeout_s:g} s"
                    + self._stderr_tail(),
                    hint="check its command and environment, or raise config.startup_timeout"
                    + network_hint(self._confine),
                )
            )
            self._task.cancel()

    def _startup_error(self, exc: BaseException) -> ConnectionFailed:
        while isinstance(exc, BaseExceptionGroup) and len(exc.exceptions) == 1:
            exc = exc.exceptions[0]
        what = "was cancelled" if isinstance(exc, asyncio.CancelledError) else f"failed: {exc or type(exc).__name__}"
        return ConnectionFailed(
            f"connecting to MCP server {self.spec.ref} {what}" + self._stderr_tail(),
            hint="check the server's command, url and environment (kiwi show <server>)" + network_hint(self._confine),
        )

    def _stderr_tail(self) -> str:
        log = self._errlog
        if log is None or log.closed:
            return ""
        with contextlib.suppress(OSError, ValueError):
            log.flush()
            log.seek(0)
            text = log.read()[-_ERRLOG_TAIL:].strip()
            return f"\nserver stderr:\n{text}" if text else ""
        return ""


# What the SDK reports for a request the server did not take: the stream closed under it
# (no connection), "Session terminated" (404), "Server returned an error response" (400).
_UNREACHED_CODES = {types.CONNECTION_CLOSED, types.INVALID_REQUEST, types.INTERNAL_ERROR}


class _RemoteAnswers(httpx2.AsyncBaseTransport):
    """HTTP to a remote server, noting answers that mean a request never got through: no
    connection could be made, or the server does not know the session the request carried
    (the spec's 404 after a restart; servers built on the TypeScript SDK's examples say 400).
    The SDK reports both like errors of a call that may have run."""

    def __init__(self, on_unreached: Any) -> None:
        self._inner = httpx2.AsyncHTTPTransport()
        self._on_unreached = on_unreached

    async def handle_async_request(self, request: httpx2.Request) -> httpx2.Response:
        try:
            response = await self._inner.handle_async_request(request)
        except httpx2.ConnectError:
            self._on_unreached()
            raise
        carried_session = request.method == "POST" and "mcp-session-id" in request.headers
        if carried_session and (
            response.status_code == 404 or (response.status_code == 400 and await _rejected_unread(response))
        ):
            self._on_unreached()
        return response

    async def aclose(self) -> None:
        await self._inner.aclose()


async def _rejected_unread(response: httpx2.Response) -> bool:
    """A 400 whose body is a JSON-RPC error for no request (no id): the server turned the
    request away before reading it. (One with the request's id answers the call itself.)
    The body is kept on the response for the SDK to read."""
    try:
        body = json.loads(await response.aread())
    except (ValueError, httpx2.HTTPError):
        return False
    return isinstance(body, dict) and isinstance(body.get("error"), dict) and body.get("id") is None


class _WatchedReceive:
    """A transport's read stream that reports its end. Once it has ended, a request sent
    on the session can never be answered, and (for stdio and SSE) was never read: the
    pool tells a call made after that from one cut off in flight."""

    def __init__(self, stream: Any, on_end: Any) -> None:
        self._stream = stream
        self._on_end = on_end

    async def __aenter__(self) -> _WatchedReceive:
        await self._stream.__aenter__()
        return self

    async def __aexit__(self, *exc: object) -> Any:
        self._on_end()
        return await self._stream.__aexit__(*exc)

    def __aiter__(self) -> _WatchedReceive:
        return self

    async def __anext__(self) -> Any:
        try:
            return await self._stream.__anext__()
        except (StopAsyncIteration, anyio.EndOfStream, anyio.ClosedResourceError, anyio.BrokenResourceError):
            self._on_end()
            raise

    async def receive(self) -> Any:
        try:
            return await self._stream.receive()
        except (anyio.EndOfStream, anyio.ClosedResourceError, anyio.BrokenResourceError):
            self._on_end()
            raise

    def __getattr__(self, name: str) -> Any:  # last_context, statistics(), close() ...
        return getattr(self._stream, name)


class _Lost(Exception):
    """The connection went away under a call; `sent`: the request may have reached the server."""

    def __init__(self, message: str, *, sent: bool) -> None:
        super().__init__(message)
        self.sent = sent


# --------------------------------------------------------------------------- the pool


class McpPool:
    """Sessions by key. Safe under concurrent calls from one event loop."""

    def __init__(self) -> None:
        self._sessions: dict[str, _Session] = {}
        self._closing: set[asyncio.Task[None]] = set()

    def session_for(self, key: str) -> _Session | None:
        """The live session of `key`, if any (for tests and diagnostics)."""
        s = self._sessions.get(key)
        return s if s is not None and not s.closed else None

    async def call_tool(
        self,
        spec: ServerSpec,
        name: str,
        arguments: dict[str, Any],
        *,
        timeout_s: float = DEFAULT_CALL_TIMEOUT_S,
        retries: int = DEFAULT_RETRIES,
        repeatable: bool = False,
        on_progress: ProgressFnT | None = None,
    ) -> tuple[types.CallToolResult, dict[str, Any]]:
        """Call one tool; returns the result and facts about the call (attempts, connect_ms).
        `repeatable`: running the tool twice does no harm, so a call cut off after it was
        sent may be retried. Raises ConnectionFailed when no attempt got an answer (or one
        was cut off that may have run), CallTimedOut, or MCPError for a protocol error the
        server answered with. `on_progress` hears the server's progress notifications for the call."""
        for attempt in range(retries + 1):
            s, connected = await self._acquire(spec, attempt, retries)
            try:
                result = await s.call_tool(name, arguments, timeout_s, on_progress)
            except _Lost as exc:
                self._discard(s)
                if exc.sent and not repeatable:
                    raise ConnectionFailed(
                        f"MCP server {spec.ref}: the connection closed during the call to {name} ({exc}); "
                        "the tool may have run, so the call was not repeated",
                        hint="run it again if repeating it is safe; config.idempotent: true, or the tool's "
                        "readOnlyHint or idempotentHint, lets Kiwi retry such calls itself",
                    ) from exc
                if attempt >= retries:
                    raise ConnectionFailed(f"MCP server {spec.ref}: {exc} (after {attempt + 1} attempts)") from exc
                await asyncio.sleep(_BACKOFF_S * attempt)
                continue
            finally:
                s.release()
            facts: dict[str, Any] = {"attempts": attempt + 1}
            if connected:
                facts["connect_ms"] = s.connect_ms
            return result, facts
        raise AssertionError("unreachable")

    async def list_tools(self, spec: ServerSpec, *, timeout_s: float = DEFAULT_CALL_TIMEOUT_S) -> list[types.Tool]:
        """Every tool the server lists (all pages), with the same retry rule as call_tool."""
        for attempt in range(DEFAULT_RETRIES + 1):
            s, _ = await self._acquire(spec, attempt, DEFAULT_RETRIES)
            try:
                return await s.list_tools(timeout_s)
            except _Lost as exc:
                self._discard(s)
                if attempt >= DEFAULT_RETRIES:
                    raise ConnectionFailed(f"MCP server {spec.ref}: {exc}") from exc
            finally:
                s.release()
        raise AssertionError("unreachable")

    async def aclose(self) -> None:
        """End every session (and so every server process this pool started)."""
        sessions = list(self._sessions.values())
        self._sessions.clear()
        await asyncio.gather(*(s.aclose() for s in sessions), *self._closing, return_exceptions=True)

    async def _acquire(self, spec: ServerSpec, attempt: int, retries: int) -> tuple[_Session, bool]:
        """The live session for spec.key, connecting it if needed, held for the caller (who
        releases it) from before any await; True when this call waited for a connection.
        Connection failures are retried here with the same budget."""
        while True:
            s = self._sessions.get(spec.key)
            fresh = s is None or not s.usable or s.spec != spec
            if fresh:
                if s is not None:
                    self._discard(s)
                s = _Session(spec)
                self._sessions[spec.key] = s
            assert s is not None
            s.in_flight += 1  # held for the caller: the idle shutdown leaves it open until release()
            try:
                await s.ready()
                return s, fresh
            except BaseException as exc:
                s.release()
                if not isinstance(exc, ConnectionFailed):
                    raise
                self._discard(s)
                if attempt >= retries:
                    raise
                attempt += 1
                await asyncio.sleep(_BACKOFF_S * attempt)

    def _discard(self, s: _Session) -> None:
        if self._sessions.get(s.spec.key) is s:
            del self._sessions[s.spec.key]
        task = asyncio.ensure_future(s.aclose())
        self._closing.add(task)
        task.add_done_callback(self._closing.discard)


# --------------------------------------------------------------------------- safety net

_LIVE: set[int] = set()  # process groups of running stdio servers (each leads its own)
_LOCK = threading.Lock()
_INSTALLED = False


def _track(pgid: int) -> None:
    global _INSTALLED
    with _LOCK:
        _LIVE.add(pgid)
        if _INSTALLED:
            return
        _INSTALLED = True
    atexit.register(kill_servers)
    if threading.current_thread() is threading.main_thread():
        for sig in (signal.SIGTERM, signal.SIGHUP):
            if signal.getsignal(sig) is signal.SIG_DFL:
                signal.signal(sig, _on_signal)


def _untrack(pgid: int) -> None:
    with _LOCK:
        _LIVE.discard(pgid)


def live_server_pids() -> set[int]:
    with _LOCK:
        return set(_LIVE)


def kill_servers() -> None:
    """Kill every stdio server still running (atexit, or a terminating signal)."""
    with _LOCK:
        groups = list(_LIVE)
        _LIVE.clear()
    for pgid in groups:
        with contextlib.suppress(OSError):
            os.killpg(pgid, signal.SIGKILL)


def _on_signal(signum: int, frame: Any) -> None:
    kill_servers()
    signal.signal(signum, signal.SIG_DFL)
    os.kill(os.getpid(), signum)
