"""The stdio transport of pooled MCP servers: the server's pipes read and written on the loop.

The SDK's `stdio_client` bridges the server's pipes to the session with two tasks and two
memory streams, so every message crosses a task and a stream more than it must: measured
here, about a third of the CPU a proxied call spends in the SDK's client. This transport
gives the SDK's `ClientSession` the same two streams (its `ReadStream` and `WriteStream`
protocols) fed straight from the pipes: a line read from stdout is parsed where it is read
and handed to the waiting session; a message sent is written to stdin where it is sent, and
only what the pipe does not take at once waits for it on the loop.

It keeps the SDK's contract: the server runs in a new session (one killpg reaches all of it),
its messages are parsed and serialised by the SDK's own types, a line that is not a message
is handed on as the exception it raised, the reader stops while the session has not taken
what it read (a server cannot fill the runner's memory), and shutdown follows the MCP spec:
stdin closed, a grace period, then SIGTERM and SIGKILL to the process group. Unlike the SDK,
it knows the server's pid, which the pool tracks so that no server outlives the runner.
"""

from __future__ import annotations

import asyncio
import collections
import contextlib
import os
import subprocess
from collections.abc import AsyncIterator, Mapping
from typing import IO, Any

import anyio
import mcp_types as types
from mcp.client.stdio import FORCE_KILL_TIMEOUT, PROCESS_TERMINATION_TIMEOUT, get_default_environment
from mcp.os.posix.utilities import terminate_posix_process_tree
from mcp.shared.message import SessionMessage

from ..primitives.launch import READ_BYTES, watch_exit

__all__ = ["StdioConnection", "stdio_connection"]

HELD_MESSAGES = 64  # read and not yet taken by the session: beyond this, stdout is not read
HELD_WRITES = 1024 * 1024  # bytes the server has not taken yet: beyond this, a send waits
FLUSH_S = 0.5  # at shutdown, for what was sent but not yet taken


class _Messages:
    """The session's read stream: what the server wrote, parsed, in order; its end at EOF."""

    def __init__(self, on_drained: Any) -> None:
        self._items: collections.deque[SessionMessage | Exception] = collections.deque()
        self._waiter: asyncio.Future[None] | None = None
        self._ended = False  # the server's stdout reached its end
        self._closed = False  # the session closed this stream
        self._on_drained = on_drained

    def put(self, item: SessionMessage | Exception) -> None:
        if not self._closed:
            self._items.append(item)
            self._wake()

    def end(self) -> None:
        self._ended = True
        self._wake()

    @property
    def full(self) -> bool:
        return len(self._items) >= HELD_MESSAGES

    def _wake(self) -> None:
        if self._waiter is not None and not self._waiter.done():
            self._waiter.set_result(None)

    async def receive(self) -> SessionMessage | Exception:
        while not self._items:
            if self._closed:
                raise anyio.ClosedResourceError
            if self._ended:
                raise anyio.EndOfStream
            self._waiter = asyncio.get_running_loop().create_future()
            try:
                await self._waiter
            finally:
                self._waiter = None
        item = self._items.popleft()
        if len(self._items) == HELD_MESSAGES // 2:
            self._on_drained()
        return item

    def __aiter__(self) -> _Messages:
        return self

    async def __anext__(self) -> SessionMessage | Exception:
        try:
            return await self.receive()
        except anyio.EndOfStream:
            raise StopAsyncIteration from None

    def close(self) -> None:
        self._closed = True
        self._items.clear()
        self._wake()
        self._on_drained()  # what the server still writes is read and dropped

    async def aclose(self) -> None:
        self.close()

    async def __aenter__(self) -> _Messages:
        return self

    async def __aexit__(self, *exc: object) -> None:
        self.close()


class _Sender:
    """The session's write stream: each message written to the server's stdin as it is sent."""

    def __init__(self, pipe: IO[bytes]) -> None:
        self._pipe: IO[bytes] | None = pipe
        self._fd = pipe.fileno()
        self._loop = asyncio.get_running_loop()
        self._pending = bytearray()  # what the pipe has not taken yet
        self._drained: asyncio.Future[None] | None = None
        self._closed = False  # the session closed this stream
        self.broken: OSError | None = None  # the server stopped reading (its stdin closed)

    async def send(self, item: SessionMessage, /) -> None:
        if self._closed or self._pipe is None:
            raise anyio.ClosedResourceError
        if self.broken is not None:
            raise anyio.BrokenResourceError from self.broken
        data = item.message.model_dump_json(by_alias=True, exclude_unset=True).encode() + b"\n"
        if self._pending:
            self._pending += data
        else:
            try:
                written = os.write(self._fd, data)
            except (BlockingIOError, InterruptedError):
                written = 0
            except OSError as e:  # nothing of it reached the server
                self.broken = e
                raise anyio.BrokenResourceError from e
            if written == len(data):
                return
            self._pending += data[written:]
            self._loop.add_writer(self._fd, self._write_more)
        while len(self._pending) > HELD_WRITES:  # the server is not reading: wait for it
            await self.drained()

    def _write_more(self) -> None:
        try:
            written = os.write(self._fd, self._pending)
        except (BlockingIOError, InterruptedError):
            return
        except OSError as e:
            self.broken = e
            self._pending.clear()
        else:
            del self._pending[:written]
        if not self._pending:
            self._loop.remove_writer(self._fd)
            if self._drained is not None and not self._drained.done():
                self._drained.set_result(None)

    async def drained(self) -> None:
        """Until the server has taken everything sent so far (or stopped reading)."""
        if self._pending:
            if self._drained is None or self._drained.done():
                self._drained = self._loop.create_future()
            await asyncio.shield(self._drained)

    def close_pipe(self) -> None:
        """Close the server's stdin (what it has not taken is dropped): the spec's signal to exit."""
        self._closed = True
        if self._pipe is not None:
            self._loop.remove_writer(self._fd)
            self._pipe.close()
            self._pipe = None
        self._pending.clear()
        if self._drained is not None and not self._drained.done():
            self._drained.set_result(None)

    async def aclose(self) -> None:
        self._closed = True

    async def __aenter__(self) -> _Sender:
        return self

    async def __aexit__(self, *exc: object) -> None:
        self._closed = True


class StdioConnection:
    """A running stdio MCP server: its pid, and the two streams a ClientSession takes."""

    def __init__(self, proc: subprocess.Popen[bytes]) -> None:
        assert proc.stdin is not None and proc.stdout is not None
        self._proc = proc
        self._loop = asyncio.get_running_loop()
        self._stdout: IO[bytes] | None = proc.stdout
        self._buffer = b""  # the start of a line not ended yet
        self._reading = False
        self._exited = self._loop.create_future()
        os.set_blocking(proc.stdout.fileno(), False)
        os.set_blocking(proc.stdin.fileno(), False)
        self.read = _Messages(self._resume)
        self.write = _Sender(proc.stdin)
        watch_exit(proc, self._on_exit)
        self._resume()

    @property
    def pid(self) -> int:
        return self._proc.pid

    def _on_exit(self) -> None:
        if not self._exited.done():
            self._exited.set_result(None)

    def _resume(self) -> None:
        if not self._reading and self._stdout is not None:
            self._reading = True
            self._loop.add_reader(self._stdout.fileno(), self._readable)

    def _pause(self) -> None:
        if self._reading and self._stdout is not None:
            self._reading = False
            self._loop.remove_reader(self._stdout.fileno())

    def _readable(self) -> None:
        assert self._stdout is not None
        try:
            data = os.read(self._stdout.fileno(), READ_BYTES)
        except (BlockingIOError, InterruptedError):
            return
        except OSError:
            data = b""
        if not data:
            self._close_stdout()
            self.read.end()
            return
        *lines, self._buffer = (self._buffer + data).split(b"\n")
        for line in lines:
            self.read.put(_parsed(line))
        if self.read.full:
            self._pause()

    def _close_stdout(self) -> None:
        self._pause()
        if self._stdout is not None:
            self._stdout.close()
            self._stdout = None

    async def _exited_within(self, seconds: float) -> bool:
        with anyio.move_on_after(seconds):
            await asyncio.shield(self._exited)
        return self._exited.done()

    async def shutdown(self) -> None:
        """The spec's sequence: flush and close stdin, a grace period to exit, then SIGTERM and
        SIGKILL to the process group. The session's stream ends; what the server still writes
        is read and dropped, so that a server blocked on a full stdout can exit."""
        self.read.close()
        with anyio.move_on_after(FLUSH_S):
            await self.write.drained()
        self.write.close_pipe()
        if not await self._exited_within(PROCESS_TERMINATION_TIMEOUT):
            await terminate_posix_process_tree(self._proc, FORCE_KILL_TIMEOUT)  # type: ignore[arg-type]
            await self._exited_within(FORCE_KILL_TIMEOUT)
        self._close_stdout()


def _parsed(line: bytes) -> SessionMessage | Exception:
    """One line of the server's stdout as a message, or the error that says why it is not one."""
    try:
        return SessionMessage(types.jsonrpc_message_adapter.validate_json(line, by_name=False))
    except ValueError as exc:
        return exc


@contextlib.asynccontextmanager
async def stdio_connection(
    argv: list[str], env: Mapping[str, str], cwd: str | None, errlog: IO[str]
) -> AsyncIterator[StdioConnection]:
    """Start the server `argv` (its environment the SDK's safe defaults and `env`, its stderr to
    `errlog`) and stop it on the way out, whatever cancels the caller. Raises what Popen raises
    when it cannot start."""
    proc = subprocess.Popen(
        argv,
        stdin=subprocess.PIPE,
        stdout=subprocess.PIPE,
        stderr=errlog,
        env=get_default_environment() | dict(env),
        cwd=cwd,
        bufsize=0,
        start_new_session=True,
    )
    connection = StdioConnection(proc)
    try:
        yield connection
    finally:
        with anyio.CancelScope(shield=True):
            await connection.shutdown()
