"""A real MCP server over a websocket on 127.0.0.1:0 (subprotocol `mcp`, one JSON-RPC message
per text frame), in a thread with its own event loop, for the websocket transport's tests.

Its one tool, `shout(text)`, answers the text in capitals. A connection must send
`Authorization: Bearer <token>`, else the handshake is refused with 401; `handshakes` keeps
the Authorization header of each one that arrived.
"""

from __future__ import annotations

import asyncio
import contextlib
import threading
from collections.abc import Iterator
from dataclasses import dataclass, field
from http import HTTPStatus
from typing import Any

import anyio
import mcp_types as types
from mcp.server import MCPServer
from mcp.shared.message import SessionMessage
from websockets.asyncio.server import ServerConnection, serve
from websockets.exceptions import ConnectionClosed
from websockets.http11 import Request, Response


@dataclass
class WebsocketServer:
    url: str
    token: str
    handshakes: list[str | None] = field(default_factory=list)


def _app() -> MCPServer:
    app = MCPServer("websocket-test")

    @app.tool(name="shout", description="Says the text back in capital letters.")
    def shout(text: str) -> str:
        return text.upper()

    return app


async def _session(ws: ServerConnection) -> None:
    """One MCP session over one websocket connection."""
    lowlevel: Any = _app()._lowlevel_server
    read_writer, read_stream = anyio.create_memory_object_stream[SessionMessage | Exception](0)
    write_stream, write_reader = anyio.create_memory_object_stream[SessionMessage](0)

    async def receive() -> None:
        async with read_writer:
            with contextlib.suppress(ConnectionClosed):
                async for frame in ws:
                    message = types.jsonrpc_message_adapter.validate_json(frame, by_name=False)
                    await read_writer.send(SessionMessage(message))

    async def send() -> None:
        async with write_reader:
            with contextlib.suppress(ConnectionClosed):
                async for message in write_reader:
                    await ws.send(message.message.model_dump_json(by_alias=True, exclude_unset=True))

    async with anyio.create_task_group() as tg:
        tg.start_soon(receive)
        tg.start_soon(send)
        await lowlevel.run(read_stream, write_stream, lowlevel.create_initialization_options())
        tg.cancel_scope.cancel()


@contextlib.contextmanager
def websocket_mcp_server(token: str = "ws-test-token") -> Iterator[WebsocketServer]:
    started = threading.Event()
    loop = asyncio.new_event_loop()
    found: dict[str, Any] = {}
    stop = asyncio.Event()

    def check(connection: ServerConnection, request: Request) -> Response | None:
        auth = request.headers.get("Authorization")
        found["server"].handshakes.append(auth)
        if auth != f"Bearer {token}":
            return connection.respond(HTTPStatus.UNAUTHORIZED, "a bearer token is needed\n")
        return None

    async def main() -> None:
        async with serve(_session, "127.0.0.1", 0, subprotocols=["mcp"], process_request=check) as server:  # type: ignore[list-item]
            port = next(iter(server.sockets)).getsockname()[1]
            found["server"] = WebsocketServer(f"ws://127.0.0.1:{port}/mcp", token)
            started.set()
            await stop.wait()

    thread = threading.Thread(target=loop.run_until_complete, args=(main(),), daemon=True)
    thread.start()
    assert started.wait(10), "the websocket MCP server did not start"
    try:
        yield found["server"]
    finally:
        loop.call_soon_threadsafe(stop.set)
        thread.join(10)
