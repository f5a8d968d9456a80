"""Kiwi's MCP server over stdio, read and written by the event loop itself.

The SDK's `stdio_server()` reads and writes the process's stdin and stdout through anyio's
worker threads: each call costs three thread hops (a readline, a write, a flush), each a
thread wake-up and a GIL hand-over, which on a busy machine cost more than the rest of the
protocol. Here both ends are the event loop's own non-blocking pipes, handed to the SDK's
`stdio_server` as its streams, so the SDK still parses and serialises every message.

The wire is claimed as the SDK claims it: while serving, fd 0 reads /dev/null and fd 1
writes to stderr, so nothing a handler or a child process prints can reach the protocol;
the wire itself lives on private close-on-exec descriptors no child inherits. Both are
restored after. Where stdin or stdout is not a pipe, socket or terminal (a regular file),
or on Windows, the SDK's own transport serves instead.
"""

from __future__ import annotations

import asyncio
import contextlib
import os
import stat
import sys
from collections.abc import AsyncIterator, Callable
from typing import Any

from mcp.server.mcpserver import MCPServer
from mcp.server.stdio import stdio_server

__all__ = ["serve_stdio", "stdio_wire"]

LINE_LIMIT = 1 << 30  # a message is one line of any size (the SDK's transport has no limit either)


async def serve_stdio(server: MCPServer) -> None:
    """`server.run_stdio_async()`, without a thread per read or write."""
    async with stdio_wire() as (stdin, stdout):
        if stdin is None:  # not pipes: the SDK's transport, threads and all
            await server.run_stdio_async()
            return
        async with stdio_server(stdin, stdout) as (read_stream, write_stream):  # type: ignore[arg-type]
            lowlevel = server._lowlevel_server  # the SDK's run_stdio_async does exactly this
            await lowlevel.run(read_stream, write_stream, lowlevel.create_initialization_options())


class LineReader:
    """Lines of text from a pipe, as `async for line in stdin` reads them (newline kept)."""

    def __init__(self, reader: asyncio.StreamReader) -> None:
        self._reader = reader

    def __aiter__(self) -> LineReader:
        return self

    async def __anext__(self) -> str:
        line = await self._reader.readline()
        if not line:
            raise StopAsyncIteration
        return line.decode("utf-8", errors="replace")


class LineWriter:
    """Text written to a pipe by the loop: `write` queues it, `flush` waits until the pipe took it."""

    def __init__(self, writer: asyncio.StreamWriter) -> None:
        self._writer = writer

    async def write(self, text: str) -> int:
        self._writer.write(text.encode("utf-8"))
        return len(text)

    async def flush(self) -> None:
        await self._writer.drain()


@contextlib.asynccontextmanager
async def stdio_wire() -> AsyncIterator[tuple[LineReader, LineWriter] | tuple[None, None]]:
    """The process's stdin and stdout as loop-driven line streams, claimed for the protocol
    while the block runs; (None, None) where they cannot be (see the module's docstring)."""
    if sys.platform == "win32" or not (_is_stream(0) and _is_stream(1)):
        yield None, None
        return
    loop = asyncio.get_running_loop()
    restores: list[Callable[[], None]] = []
    transports: list[asyncio.BaseTransport] = []
    try:
        wire_in = _claim(0, lambda: os.open(os.devnull, os.O_RDONLY), restores)
        wire_out = _claim(1, _stderr_or_null, restores)
        reader = asyncio.StreamReader(limit=LINE_LIMIT, loop=loop)
        read_transport, _ = await loop.connect_read_pipe(
            lambda: asyncio.StreamReaderProtocol(reader, loop=loop), os.fdopen(wire_in, "rb", buffering=0)
        )
        transports.append(read_transport)
        transport, protocol = await loop.connect_write_pipe(
            lambda: _WriteProtocol(loop), os.fdopen(wire_out, "wb", buffering=0)
        )
        transports.append(transport)
        writer = asyncio.StreamWriter(transport, protocol, None, loop)
        yield LineReader(reader), LineWriter(writer)
    finally:
        for opened in transports:  # each closes its own copy of the wire
            opened.close()
        for restore in reversed(restores):
            restore()


class _WriteProtocol(asyncio.streams.FlowControlMixin, asyncio.Protocol):
    """What StreamWriter.drain needs of a write pipe's protocol: pause and resume."""

    def __init__(self, loop: asyncio.AbstractEventLoop) -> None:
        super().__init__(loop=loop)
        self._closed = loop.create_future()

    def connection_lost(self, exc: Exception | None) -> None:
        super().connection_lost(exc)
        if not self._closed.done():
            self._closed.set_result(None)

    def _get_close_waiter(self, stream: Any) -> asyncio.Future[None]:
        return self._closed


def _stderr_or_null() -> int:
    """Where fd 1 points while serving: stderr, or the null device when there is none."""
    try:
        return os.dup(2)
    except OSError:
        return os.open(os.devnull, os.O_WRONLY)


def _is_stream(fd: int) -> bool:
    """Whether fd is something the loop can watch: a pipe, a socket or a terminal."""
    try:
        mode = os.fstat(fd).st_mode
    except OSError:
        return False
    return stat.S_ISFIFO(mode) or stat.S_ISSOCK(mode) or stat.S_ISCHR(mode)


def _claim(fd: int, diversion: Callable[[], int], restores: list[Callable[[], None]]) -> int:
    """A private close-on-exec copy of fd (the wire), with fd itself pointed at `diversion`;
    the wire's own blocking mode and fd are put back by the restore it appends."""
    wire = _dup_above_std(fd)
    blocking = os.get_blocking(wire)
    spare = _dup_above_std(wire)  # the wire for fd again at the end (the loop closes `wire`)

    def restore() -> None:
        with contextlib.suppress(OSError):
            os.dup2(spare, fd)
            os.set_blocking(fd, blocking)
        with contextlib.suppress(OSError):
            os.close(spare)

    restores.append(restore)
    divert = diversion()
    try:
        os.dup2(divert, fd)
    finally:
        os.close(divert)
    return wire


def _dup_above_std(fd: int) -> int:
    import fcntl  # POSIX only; this module serves the wire on POSIX only

    return fcntl.fcntl(fd, fcntl.F_DUPFD_CLOEXEC, 3)
