"""A fake of Supabase Storage's object API, as a real HTTP server in a thread on 127.0.0.1:0:
what the runner's Storage client (runner/registry/storage.py) talks to in the tests.

    POST|PUT /storage/v1/object/<bucket>/<path>   keeps the body (x-upsert: true overwrites,
                                                 else an existing object is 400 Duplicate)
    GET /storage/v1/object/<bucket>/<path>        the object, or 400 "Object not found"
    GET /storage/v1/object/authenticated/<bucket>/<path>   the same

Every request needs `Authorization: Bearer <token>` with the server's token, else 403, as
Storage answers an unauthorised request. `objects` is what it holds ("<bucket>/<path>" ->
bytes): a test changes an object there to play a tampered store.
"""

from __future__ import annotations

import json
import threading
from collections.abc import Iterator
from contextlib import contextmanager
from dataclasses import dataclass, field
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from urllib.parse import unquote, urlsplit

PREFIX = "/storage/v1/object/"


@dataclass
class FakeStorage:
    url: str  # .../storage/v1, as KIWI_STORAGE_URL takes it
    token: str
    objects: dict[str, bytes] = field(default_factory=dict)
    requests: list[tuple[str, str]] = field(default_factory=list)  # (method, "<bucket>/<path>")


class _Handler(BaseHTTPRequestHandler):
    protocol_version = "HTTP/1.1"
    fake: FakeStorage

    def log_message(self, format: str, *args: object) -> None:
        pass

    def _key(self) -> str | None:
        path = unquote(urlsplit(self.path).path)
        if not path.startswith(PREFIX):
            return None
        key = path[len(PREFIX) :]
        return key.removeprefix("authenticated/")

    def _answer(self, status: int, body: bytes, content_type: str = "application/json") -> None:
        self.send_response(status)
        self.send_header("Content-Type", content_type)
        self.send_header("Content-Length", str(len(body)))
        self.end_headers()
        self.wfile.write(body)

    def _error(self, status: int, error: str, message: str) -> None:
        body = {"statusCode": str(status), "error": error, "message": message}
        self._answer(status if status != 404 else 400, json.dumps(body).encode())

    def _allowed(self) -> str | None:
        key = self._key()
        self.fake.requests.append((self.command, key or self.path))
        if self.headers.get("Authorization") != f"Bearer {self.fake.token}":
            self._error(403, "Unauthorized", "invalid signature")
            return None
        if key is None or "/" not in key:
            self._error(400, "InvalidKey", "an object is /object/<bucket>/<path>")
            return None
        return key

    def do_GET(self) -> None:
        key = self._allowed()
        if key is None:
            return
        data = self.fake.objects.get(key)
        if data is None:
            self._error(404, "not_found", "Object not found")
        else:
            self._answer(200, data, "application/octet-stream")

    def _put(self) -> None:
        length = int(self.headers.get("Content-Length") or 0)
        data = self.rfile.read(length)
        key = self._allowed()
        if key is None:
            return
        if key in self.fake.objects and self.headers.get("x-upsert") != "true":
            self._error(409, "Duplicate", "The resource already exists")
            return
        self.fake.objects[key] = data
        self._answer(200, json.dumps({"Key": key}).encode())

    do_POST = _put
    do_PUT = _put


@contextmanager
def fake_storage(token: str = "fake-storage-service-key") -> Iterator[FakeStorage]:
    server = ThreadingHTTPServer(("127.0.0.1", 0), _Handler)
    server.daemon_threads = True
    fake = FakeStorage(f"http://127.0.0.1:{server.server_address[1]}/storage/v1", token)
    server.RequestHandlerClass = type("Handler", (_Handler,), {"fake": fake})
    thread = threading.Thread(target=server.serve_forever, daemon=True)
    thread.start()
    try:
        yield fake
    finally:
        server.shutdown()
        server.server_close()
