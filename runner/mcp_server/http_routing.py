"""Sessions of `kiwi serve --transport http --processes N`: any process answers any session.

An MCP session lives in the process that opened it (the SDK's transport, its server task,
the client's log level and open GET stream); tasks, runs and everything else live in Postgres.
With N processes accepting on one port, a client's next request may come on another
connection, to another process. So:

* **A session's id names its process**: `<index>-<uuid hex>` (`session_id_prefix`), made by
  the session manager (http_sessions.py) when it admits the session.
* **A request for another process's session is forwarded to it** (`SessionRouter`), over that
  process's own Unix socket in a directory only this user can open (`worker_socket`): the
  request as it came (its token checked again there), the answer streamed back as it is
  written, a GET's event stream included, until either side hangs up. Requests without a
  session id, or for this process's own sessions, are served here, untouched.
* When that process is gone (restarting after a crash), its sessions are gone with it: the
  answer is the SDK's own 404 "Session not found", and the client opens another session, as
  the specification says.

A client keeping its connection open (the SDK's does) stays with one process; forwarding is
for its other connections (an event stream beside its calls, a pool of several).
"""

from __future__ import annotations

import contextlib
from pathlib import Path
from typing import Any

import anyio
import httpx
from mcp.server.streamable_http import MCP_SESSION_ID_HEADER
from mcp.server.transport_security import DEFAULT_MAX_REQUEST_BODY_SIZE
from mcp_types import INVALID_REQUEST
from starlette.datastructures import Headers
from starlette.responses import JSONResponse
from starlette.types import ASGIApp, Receive, Scope, Send

__all__ = ["SessionRouter", "owner_of", "session_id_prefix", "worker_socket"]

_HOP_BY_HOP = frozenset({b"connection", b"keep-alive", b"transfer-encoding", b"content-length", b"upgrade"})


def session_id_prefix(index: int) -> str:
    """What the session ids of process `index` start with."""
    return f"{index}-"


def worker_socket(run_dir: Path, index: int) -> Path:
    """The Unix socket process `index` also serves on, for requests forwarded to it."""
    return run_dir / f"process-{index}.sock"


def owner_of(session_id: str, processes: int) -> int | None:
    """The index of the process a session id names, or None when it names none of them."""
    index, dash, _ = session_id.partition("-")
    if not dash or not index.isdigit() or len(index) > 4:
        return None
    found = int(index)
    return found if found < processes else None


class SessionRouter:
    """An ASGI wrapper: a request at `path` for a session another process owns goes there."""

    def __init__(self, app: ASGIApp, *, index: int, processes: int, run_dir: Path, path: str = "/mcp") -> None:
        self.app = app
        self.index = index
        self.processes = processes
        self.run_dir = run_dir
        self.path = path
        self._clients: dict[int, httpx.AsyncClient] = {}

    async def __call__(self, scope: Scope, receive: Receive, send: Send) -> None:
        if scope["type"] == "http" and scope["path"] == self.path:
            session = Headers(scope=scope).get(MCP_SESSION_ID_HEADER)
            owner = owner_of(session, self.processes) if session is not None else None
            if owner is not None and owner != self.index:
                await self._forward(owner, scope, receive, send)
                return
        await self.app(scope, receive, send)

    async def aclose(self) -> None:
        for client in self._clients.values():
            await client.aclose()
        self._clients.clear()

    def _client(self, owner: int) -> httpx.AsyncClient:
        client = self._clients.get(owner)
        if client is None:
            transport = httpx.AsyncHTTPTransport(uds=str(worker_socket(self.run_dir, owner)))
            client = httpx.AsyncClient(transport=transport, timeout=httpx.Timeout(None, connect=5.0))
            self._clients[owner] = client
        return client

    async def _forward(self, owner: int, scope: Scope, receive: Receive, send: Send) -> None:
        body = await _body(receive, DEFAULT_MAX_REQUEST_BODY_SIZE)
        if body is None:
            await _error(413, "Payload Too Large: the request body is over the limit")(scope, receive, send)
            return
        target = scope["path"] + (("?" + scope["query_string"].decode("latin-1")) if scope.get("query_string") else "")
        headers = [(k, v) for k, v in scope["headers"] if k.lower() not in _HOP_BY_HOP]
        client = self._client(owner)
        request = client.build_request(scope["method"], "http://kiwi" + target, headers=headers, content=body)
        try:
            response = await client.send(request, stream=True)
        except (httpx.ConnectError, httpx.RemoteProtocolError, FileNotFoundError):
            # its process is gone (restarting): so are its sessions, as the SDK says of any unknown one
            await _error(404, "Session not found")(scope, receive, send)
            return
        try:
            await _relay(response, receive, send)
        finally:
            await response.aclose()


async def _relay(response: httpx.Response, receive: Receive, send: Send) -> None:
    """Send `response` on as it arrives; stop when the client hangs up."""
    headers = [(k, v) for k, v in response.headers.raw if k.lower() not in _HOP_BY_HOP]
    await send({"type": "http.response.start", "status": response.status_code, "headers": headers})
    async with anyio.create_task_group() as group:

        async def hung_up() -> None:
            while (await receive())["type"] != "http.disconnect":
                pass
            group.cancel_scope.cancel()

        group.start_soon(hung_up)
        with contextlib.suppress(httpx.HTTPError):  # the owner went away mid-answer: end it here too
            async for chunk in response.aiter_raw():
                await send({"type": "http.response.body", "body": chunk, "more_body": True})
        await send({"type": "http.response.body", "body": b"", "more_body": False})
        group.cancel_scope.cancel()


async def _body(receive: Receive, limit: int) -> bytes | None:
    """The whole request body, or None when it is over `limit` bytes."""
    parts: list[bytes] = []
    size = 0
    while True:
        message = await receive()
        if message["type"] != "http.request":
            break
        chunk = message.get("body", b"")
        size += len(chunk)
        if size > limit:
            return None
        parts.append(chunk)
        if not message.get("more_body", False):
            break
    return b"".join(parts)


def _error(status: int, message: str) -> Any:
    error = {"code": INVALID_REQUEST, "message": message}
    return JSONResponse({"jsonrpc": "2.0", "id": None, "error": error}, status_code=status)
