"""A small real HTTP server for the http_client tests, run in a thread on 127.0.0.1:0
(or another loopback address: `serving`).

Routes (any method):
  /echo/...            200, JSON of what arrived: method, raw path, query, headers, body
  /status/<code>       that status, the request echoed as the body
  /flaky/<key>/<n>     503 the first n times a key is seen, then as /echo
  /slow/<seconds>      waits, then as /echo
  /big/<bytes>         a text body of that many bytes
  /leak                401 whose body repeats the Authorization header it got
  /cookie/<value>      as /echo, and sets the cookie session=<value>
  /text/<charset>      "café" in that charset as text/plain, naming it ("none": UTF-8, named not)
  /redirect/<code>/<to>  that status with Location: <to> percent-decoded (none without it)

Every request is also kept in the server's `received` list (what a redirect target got).
"""

from __future__ import annotations

import json
import threading
import time
from collections import Counter
from collections.abc import Iterator
from contextlib import contextmanager, suppress
from dataclasses import dataclass
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from urllib.parse import parse_qs, unquote, urlsplit


class _Server(ThreadingHTTPServer):
    daemon_threads = True
    request_queue_size = 512  # hundreds of concurrent connects in the load test
    hits: Counter[str]
    received: list[dict[str, object]]


class _Handler(BaseHTTPRequestHandler):
    protocol_version = "HTTP/1.1"  # keep-alive, as the client's pool expects
    disable_nagle_algorithm = True  # headers and body are two writes: no 40 ms delayed-ACK stall
    server: _Server

    def log_message(self, format: str, *args: object) -> None:
        pass

    def _handle(self) -> None:
        length = int(self.headers.get("Content-Length") or 0)
        raw = self.rfile.read(length).decode() if length else ""
        try:
            body = json.loads(raw) if raw else None
        except ValueError:
            body = raw
        parts = urlsplit(self.path)
        seen = {
            "method": self.command,
            "path": parts.path,
            "query": parse_qs(parts.query),
            "headers": dict(self.headers.items()),
            "header_lines": [[name.lower(), value] for name, value in self.headers.items()],
            "body": body,
        }
        self.server.received.append(seen)
        segments = parts.path.strip("/").split("/")
        route = segments[0]
        if route == "redirect":
            self._redirect(int(segments[1]), unquote(segments[2]) if len(segments) > 2 else None)
        elif route == "status":
            self._send(int(segments[1]), seen)
        elif route == "flaky":
            key, failures = segments[1], int(segments[2])
            self.server.hits[key] += 1
            self._send(503 if self.server.hits[key] <= failures else 200, seen)
        elif route == "slow":
            time.sleep(float(segments[1]))
            self._send(200, seen)
        elif route == "big":
            self._send(200, "x" * int(segments[1]), content_type="text/plain")
        elif route == "cookie":
            self._send(200, seen, cookie=f"session={segments[1]}; Path=/")
        elif route == "text":
            named = segments[1] != "none"
            self._send(
                200,
                "café".encode(segments[1] if named else "utf-8"),
                content_type=f"text/plain; charset={segments[1]}" if named else "text/plain",
            )
        elif route == "leak":
            self._send(401, {"message": f"bad credentials: {self.headers.get('Authorization')}"})
        else:
            self._send(200, seen)

    def _redirect(self, status: int, location: str | None) -> None:
        self.send_response(status)
        if location is not None:
            self.send_header("Location", location)
        self.send_header("Content-Length", "0")
        self.end_headers()

    def _send(
        self, status: int, payload: object, content_type: str = "application/json", cookie: str | None = None
    ) -> None:
        if isinstance(payload, bytes):
            data = payload
        else:
            data = (payload if isinstance(payload, str) else json.dumps(payload)).encode()
        self.send_response(status)
        if cookie is not None:
            self.send_header("Set-Cookie", cookie)
        self.send_header("Content-Type", content_type)
        self.send_header("Content-Length", str(len(data)))
        self.end_headers()
        with suppress(BrokenPipeError, ConnectionResetError):  # the client stopped reading (a cut body)
            self.wfile.write(data)

    do_GET = do_POST = do_PUT = do_PATCH = do_DELETE = _handle


@dataclass
class Served:
    """A running server: its base URL and every request it got, in order."""

    url: str
    received: list[dict[str, object]]


@contextmanager
def serving(host: str = "127.0.0.1") -> Iterator[Served]:
    """Runs the server on `host` (a loopback address) for the duration of the block."""
    server = _Server((host, 0), _Handler)
    server.hits = Counter()
    server.received = []
    thread = threading.Thread(target=server.serve_forever, kwargs={"poll_interval": 0.05}, daemon=True)
    thread.start()
    try:
        yield Served(f"http://{host}:{server.server_address[1]}", server.received)
    finally:
        server.shutdown()
        server.server_close()


@contextmanager
def serve() -> Iterator[str]:
    """Runs the server for the duration of the block; yields its base URL."""
    with serving() as served:
        yield served.url
