"""A small HTTP/1.1 keep-alive echo server for bench/runner_bench.py, on raw asyncio.

Every request (any method, any path) gets 200 and the JSON object `{"json": <body>}`:
the body it received, inserted as it arrived when the request says it is JSON (no
parsing, so the server costs little per request), else as a JSON string, or null when
there is none. That is the shape the seeded http_echo tool reads with `$.json`.
`/__stats` answers `{"served": N, "cpu_s": S}` instead: requests echoed so far and the
server's CPU time, so a caller can tell how much of a core it used per request.

Run:  python bench/echo_server.py [--port 0] [--watch-stdin]
It prints `listening on http://127.0.0.1:PORT` and serves until SIGTERM / SIGINT, or,
with --watch-stdin, until its stdin pipe closes (so it never outlives the bench).
"""

from __future__ import annotations

import argparse
import asyncio
import json
import os
import signal
import sys
import time

_HEAD_END = b"\r\n\r\n"
_MAX_HEAD = 64 * 1024


class EchoProtocol(asyncio.Protocol):
    served = 0

    def __init__(self) -> None:
        self.buf = bytearray()
        self.transport: asyncio.Transport | None = None

    def connection_made(self, transport: asyncio.BaseTransport) -> None:
        assert isinstance(transport, asyncio.Transport)
        self.transport = transport

    def data_received(self, data: bytes) -> None:
        self.buf += data
        while True:
            end = self.buf.find(_HEAD_END)
            if end < 0:
                if len(self.buf) > _MAX_HEAD:
                    self._reply(431, b'{"error": "request head too large"}', close=True)
                return
            head = bytes(self.buf[:end]).decode("latin-1")
            lines = head.split("\r\n")
            length, is_json, close = 0, False, lines[0].endswith("HTTP/1.0")
            for line in lines[1:]:
                name, _, value = line.partition(":")
                name = name.strip().lower()
                if name == "content-length":
                    length = int(value.strip())
                elif name == "content-type":
                    is_json = "json" in value.lower()
                elif name == "connection":
                    close = value.strip().lower() == "close"
                elif name == "transfer-encoding":
                    self._reply(501, b'{"error": "chunked bodies are not supported"}', close=True)
                    return
            start = end + len(_HEAD_END)
            if len(self.buf) < start + length:
                return  # the body is still on its way
            body = bytes(self.buf[start : start + length])
            del self.buf[: start + length]
            if lines[0].split(" ", 2)[1:2] == ["/__stats"]:
                stats = {"served": EchoProtocol.served, "cpu_s": time.process_time()}
                self._reply(200, json.dumps(stats).encode(), close=close)
                if close:
                    return
                continue
            if not body:
                payload = b'{"json": null}'
            elif is_json:
                payload = b'{"json": ' + body + b"}"
            else:
                payload = b'{"json": ' + json.dumps(body.decode("utf-8", "replace")).encode() + b"}"
            EchoProtocol.served += 1
            self._reply(200, payload, close=close)
            if close:
                return

    def _reply(self, status: int, payload: bytes, *, close: bool) -> None:
        assert self.transport is not None
        reason = {200: "OK", 431: "Request Header Fields Too Large", 501: "Not Implemented"}[status]
        self.transport.write(
            f"HTTP/1.1 {status} {reason}\r\nContent-Type: application/json\r\n"
            f"Content-Length: {len(payload)}\r\n{'Connection: close' + chr(13) + chr(10) if close else ''}\r\n".encode()
            + payload
        )
        if close:
            self.transport.close()


async def serve(host: str, port: int, watch_stdin: bool = False) -> None:
    loop = asyncio.get_running_loop()
    server = await loop.create_server(EchoProtocol, host, port, backlog=1024, reuse_address=True)
    bound = server.sockets[0].getsockname()[1]
    print(f"listening on http://{host}:{bound}", flush=True)
    stop = asyncio.Event()
    for sig in (signal.SIGTERM, signal.SIGINT):
        loop.add_signal_handler(sig, stop.set)
    if watch_stdin:  # stop when the parent goes away (its end of our stdin pipe closes)

        def on_stdin() -> None:
            if not os.read(sys.stdin.fileno(), 4096):
                stop.set()

        loop.add_reader(sys.stdin.fileno(), on_stdin)
    async with server:
        await stop.wait()


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--host", default="127.0.0.1")
    parser.add_argument("--port", type=int, default=0, help="0: any free port (printed)")
    parser.add_argument("--watch-stdin", action="store_true", help="stop when stdin (a pipe) closes")
    args = parser.parse_args()
    asyncio.run(serve(args.host, args.port, args.watch_stdin))


if __name__ == "__main__":
    main()
