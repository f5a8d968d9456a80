"""What a child process writes: collected up to a cap (Collector, the subprocess primitive's
protocol), and as whole lines while it runs, for whoever follows the run (RunListener).

Bytes arrive in pieces of any size; a line is handed on only once its newline has arrived (or
the stream ended), so a value split across two writes reaches the listener whole, where the
runner can mask it. A line longer than MAX_LINE_BYTES is never handed on in parts: it is
replaced by a note of its size, so no cut can leave half of a secret unmasked.
"""

from __future__ import annotations

import asyncio
import logging
from collections.abc import Callable

logger = logging.getLogger("kiwi.runner")

MAX_LINE_BYTES = 16 * 1024


class LineSplitter:
    """Feed it bytes; it calls `sink` with each complete line (decoded, without its newline)."""

    def __init__(self, sink: Callable[[str], None], max_line_bytes: int = MAX_LINE_BYTES) -> None:
        self._sink = sink
        self._max = max_line_bytes
        self._partial = bytearray()
        self._skipped = 0  # bytes of an over-long line not kept, until its newline

    def feed(self, data: bytes) -> None:
        start = 0
        while (end := data.find(b"\n", start)) != -1:
            self._take(data[start:end])
            self._emit()
            start = end + 1
        self._take(data[start:])

    def close(self) -> None:
        """The stream ended: what is left is the last line."""
        if self._partial or self._skipped:
            self._emit()

    def _take(self, piece: bytes) -> None:
        if self._skipped or len(self._partial) + len(piece) > self._max:
            self._skipped += len(self._partial) + len(piece)
            self._partial.clear()
        else:
            self._partial += piece

    def _emit(self) -> None:
        if self._skipped:
            line = f"[a line of {self._skipped} bytes, too long to show]"
        else:
            line = self._partial.decode("utf-8", errors="replace").removesuffix("\r")
        self._partial.clear()
        self._skipped = 0
        try:
            self._sink(line)
        except Exception:  # a listener's fault must never stop the run that feeds it
            logger.debug("a run's line listener failed", exc_info=True)


class Collector:
    """Keeps the first `limit` bytes of stdout (fd 1) and stderr (fd 2) and discards the rest
    as it arrives, so the child never blocks on a full pipe and memory stays bounded. Fed by
    launch.py: each piece read, each pipe's end, the process's exit."""

    def __init__(
        self, limit: int, loop: asyncio.AbstractEventLoop, on_stderr_line: Callable[[str], None] | None = None
    ) -> None:
        self.limit = limit
        self.data = {1: bytearray(), 2: bytearray()}
        self.truncated = {1: False, 2: False}
        self.exited: asyncio.Future[None] = loop.create_future()
        self.pipes_done: asyncio.Future[None] = loop.create_future()
        self._open: set[int] = {1, 2}
        self._lines = LineSplitter(on_stderr_line) if on_stderr_line else None

    def pipe_data_received(self, fd: int, data: bytes) -> None:
        buf = self.data[fd]
        room = self.limit - len(buf)
        if room > 0:
            buf += data[:room]
        if len(data) > room:
            self.truncated[fd] = True
        if fd == 2 and self._lines is not None:
            self._lines.feed(data)

    def pipe_connection_lost(self, fd: int, exc: Exception | None) -> None:
        self._open.discard(fd)
        if fd == 2 and self._lines is not None:
            self._lines.close()
        if not self._open and not self.pipes_done.done():
            self.pipes_done.set_result(None)

    def process_exited(self) -> None:
        if not self.exited.done():
            self.exited.set_result(None)
