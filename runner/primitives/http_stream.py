"""Streamed responses of the http_client primitive: each piece is progress as it arrives, and
the pieces are the run's output once the response has ended.

`config.stream` says how a response body is read:

* `auto` (the default): server-sent events when the response is `text/event-stream`, lines
  when it is newline-delimited JSON (`application/x-ndjson`, `application/jsonl`, ...), else
  the whole body at once as before;
* `sse`, `lines`, `chunks`: that reading whatever the response's type; `off`: the whole body.

Server-sent events become `{event, data, id}` items (data parsed as JSON when it is JSON, the
event `message` when the server named none), lines become one item each (JSON when they are),
and chunks are joined into the body (parsed as JSON when it is). Each event, line or chunk is
passed to the run's progress as it arrives (`kiwi run` prints it, an MCP client that sent a
progressToken gets a notification). `config.stream_until`: a data value (an event's data or a
line, as sent) that ends the stream, as `[DONE]` ends some APIs' streams; it is not collected.
`max_response_bytes` caps what is read, as for any response.
"""

from __future__ import annotations

import codecs
import json
import re
from collections.abc import Callable, Mapping
from typing import Any, NamedTuple

import httpx

from ..errors import ConfigError

__all__ = ["FORMATS", "Body", "StreamSpec", "read_body", "stream_spec"]

FORMATS = ("auto", "off", "sse", "lines", "chunks")
_LINE_TYPES = ("application/x-ndjson", "application/ndjson", "application/jsonl", "application/x-jsonlines")
_EOL = re.compile(r"\r\n|\r|\n")
_SHOWN = 1000  # the most of one piece a progress message shows


class StreamSpec(NamedTuple):
    format: str
    until: str | None

    def chosen(self, response: httpx.Response) -> str:
        """The reading for this response: `auto` decided by its Content-Type."""
        if self.format != "auto":
            return self.format
        kind = response.headers.get("content-type", "").split(";")[0].strip().lower()
        if kind == "text/event-stream":
            return "sse"
        return "lines" if kind in _LINE_TYPES else "off"


def stream_spec(config: Mapping[str, Any], tool: str) -> StreamSpec:
    fmt = config.get("stream", "auto")
    if fmt is True:
        fmt = "auto"
    elif fmt is False:
        fmt = "off"
    if fmt not in FORMATS:
        raise ConfigError(f"{tool}: config.stream must be one of {', '.join(FORMATS)}, not {fmt!r}")
    until = config.get("stream_until")
    if until is not None and not isinstance(until, str):
        raise ConfigError(f"{tool}: config.stream_until must be a text, not {until!r}")
    return StreamSpec(str(fmt), until)


class Body(NamedTuple):
    """A response body as read: its bytes (at most the limit), whether it was cut, and the
    pieces a streamed reading collected (None when the body was read whole)."""

    raw: bytes
    truncated: bool
    format: str
    items: list[Any] | None
    pieces: int


async def read_body(
    response: httpx.Response, limit: int, spec: StreamSpec, progress: Callable[[str], None] | None
) -> Body:
    """Reads at most `limit` bytes of the (decoded) body, passing each piece on as it comes."""
    fmt = spec.chosen(response)
    reader = _Reader(fmt, spec.until, progress)
    chunks: list[bytes] = []
    size = 0
    truncated = False
    async for chunk in response.aiter_bytes():
        if size + len(chunk) > limit:
            chunk, truncated = chunk[: limit - size], True
        chunks.append(chunk)
        size += len(chunk)
        if fmt != "off" and reader.feed(chunk):
            break
        if truncated:
            break
    if fmt != "off" and not truncated:
        reader.close()
    items = reader.items if fmt in ("sse", "lines") else None
    return Body(b"".join(chunks), truncated, fmt, items, reader.pieces)


class _Reader:
    """Splits a body into pieces as its bytes arrive; `feed` says when `until` was seen."""

    def __init__(self, fmt: str, until: str | None, progress: Callable[[str], None] | None) -> None:
        self.fmt, self.until, self.progress = fmt, until, progress
        self.decoder = codecs.getincrementaldecoder("utf-8")(errors="replace")
        self.buffer = ""
        self.items: list[Any] = []
        self.pieces = 0
        self.ended = False
        self._data: list[str] = []
        self._event: str | None = None
        self._id: str | None = None

    def feed(self, chunk: bytes, final: bool = False) -> bool:
        text = self.decoder.decode(chunk, final)
        if self.fmt == "chunks":
            if text:
                self._tell(text)
            return False
        self.buffer += text
        while not self.ended:
            found = _EOL.search(self.buffer)
            if found is None or (found.group() == "\r" and found.end() == len(self.buffer) and not final):
                break  # a "\r" at the end may be the first half of "\r\n"
            line, self.buffer = self.buffer[: found.start()], self.buffer[found.end() :]
            self._line(line)
        return self.ended

    def close(self) -> None:
        """The body ended: what is left is a last line (and a last event without its blank line)."""
        self.feed(b"", final=True)
        if self.buffer and not self.ended:
            self._line(self.buffer)
        self.buffer = ""
        if self.fmt == "sse" and not self.ended:
            self._line("")

    def _line(self, line: str) -> None:
        if self.fmt == "lines":
            if line.strip():
                self._piece(line, line)
            return
        if not line:
            if self._data:
                data = "\n".join(self._data)
                item: dict[str, Any] = {"event": self._event or "message", "data": data}
                if self._id is not None:
                    item["id"] = self._id
                shown = data if item["event"] == "message" else f"{item['event']}: {data}"
                self._piece(data, shown, item)
            self._data, self._event = [], None
            return
        if line.startswith(":"):
            return  # a comment (a keep-alive)
        name, _, value = line.partition(":")
        value = value[1:] if value.startswith(" ") else value
        if name == "data":
            self._data.append(value)
        elif name == "event":
            self._event = value
        elif name == "id" and "\x00" not in value:
            self._id = value

    def _piece(self, data: str, shown: str, item: dict[str, Any] | None = None) -> None:
        if self.until is not None and data == self.until:
            self.ended = True
            return
        parsed = _parsed(data)
        if item is None:
            self.items.append(parsed)
        else:
            item["data"] = parsed
            self.items.append(item)
        self._tell(shown)

    def _tell(self, text: str) -> None:
        self.pieces += 1
        if self.progress is not None:
            self.progress(text if len(text) <= _SHOWN else text[:_SHOWN] + "…")


def _parsed(text: str) -> Any:
    try:
        return json.loads(text)
    except ValueError:
        return text
