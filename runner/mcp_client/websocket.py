"""MCP over a websocket, for remote servers whose config says `transport: websocket`: one
JSON-RPC message per text frame, subprotocol `mcp`, as the MCP SDKs' websocket transports
speak it. The SDK this runner pins has no websocket client of its own, so this is one, on the
`websockets` library, yielding the read and write streams a ClientSession takes.

The connection carries the server's `headers` (an Authorization among them) on its opening
request. A frame that is not a JSON-RPC message reaches the session as an exception, as the
SDK's other transports hand it on; the socket closing ends the read stream.
"""

from __future__ import annotations

import contextlib
from collections.abc import AsyncIterator, Mapping
from typing import Any

import anyio
import mcp_types as types
from anyio.abc import ObjectReceiveStream, ObjectSendStream
from mcp.shared.message import SessionMessage
from websockets.asyncio.client import connect
from websockets.exceptions import ConnectionClosed

from ..errors import ConfigError

__all__ = ["SUBPROTOCOL", "websocket_client"]

SUBPROTOCOL = "mcp"
MAX_FRAME_BYTES = 64 * 1024 * 1024
Streams = tuple[ObjectReceiveStream[SessionMessage | Exception], ObjectSendStream[SessionMessage]]


@contextlib.asynccontextmanager
async def websocket_client(
    url: str, headers: Mapping[str, str], open_timeout_s: float, auth: Any = None
) -> AsyncIterator[Streams]:
    """The session's streams over a websocket to `url`. `auth` (an OAuth provider for HTTP
    requests) has no place on a websocket: a server that signs users in is refused."""
    if auth is not None:
        raise ConfigError(f"{url}: OAuth sign-in (config.auth type oauth) is for HTTP transports, not websocket")
    read_writer, read_stream = anyio.create_memory_object_stream[SessionMessage | Exception](0)
    write_stream, write_reader = anyio.create_memory_object_stream[SessionMessage](0)
    async with connect(
        url,
        subprotocols=[SUBPROTOCOL],  # type: ignore[list-item]
        additional_headers=dict(headers),
        open_timeout=open_timeout_s,
        max_size=MAX_FRAME_BYTES,  # a proxy from the environment (HTTPS_PROXY, ...) is used as for HTTP
    ) as ws:

        async def receive() -> None:
            async with read_writer:
                with contextlib.suppress(ConnectionClosed, anyio.ClosedResourceError, anyio.BrokenResourceError):
                    async for frame in ws:
                        try:
                            message = types.jsonrpc_message_adapter.validate_json(frame, by_name=False)
                        except ValueError as exc:
                            await read_writer.send(exc)
                            continue
                        await read_writer.send(SessionMessage(message))

        async def send() -> None:
            async with write_reader:
                with contextlib.suppress(ConnectionClosed, anyio.ClosedResourceError, anyio.BrokenResourceError):
                    async for session_message in write_reader:
                        await ws.send(session_message.message.model_dump_json(by_alias=True, exclude_unset=True))

        async with anyio.create_task_group() as tg:
            tg.start_soon(receive)
            tg.start_soon(send)
            try:
                yield read_stream, write_stream
            finally:
                tg.cancel_scope.cancel()
                await ws.close()
                for stream in (read_stream, write_stream):
                    await stream.aclose()
