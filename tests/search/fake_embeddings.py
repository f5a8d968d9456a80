"""A FAKE OpenAI-compatible embeddings server on localhost, for testing `OpenAICompatible`
without a network: `POST /v1/embeddings` answers as the API does, with vectors made from
each text's sha256 (deterministic, deliberately NOT normalised, in shuffled `index` order),
and can be told to answer another number of dimensions, an HTTP error, something else, or slowly. It keeps
every request it received (headers and JSON body) in `requests`."""

from __future__ import annotations

import hashlib
import json
import threading
import time
from collections.abc import Iterator
from contextlib import contextmanager
from dataclasses import dataclass, field
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from typing import Any


@dataclass
class FakeEmbeddingsServer:
    dimensions: int | None = None  # None: as asked (the request's "dimensions")
    status: int = 200
    error_message: str = "something went wrong"
    delay_s: float = 0.0
    other_answer: dict[str, Any] | None = None  # answered instead of embeddings (with 200)
    requests: list[dict[str, Any]] = field(default_factory=list)
    url: str = ""  # the base URL (…/v1), once started

    def vector(self, text: str, size: int) -> list[float]:
        seed = hashlib.sha256(text.encode()).digest()
        return [(seed[i % len(seed)] - 127.5) / 10 for i in range(size)]  # length far from 1

    def answer(self, body: dict[str, Any]) -> tuple[int, dict[str, Any]]:
        if self.other_answer is not None:
            return 200, self.other_answer
        if self.status != 200:
            return self.status, {"error": {"message": self.error_message, "type": "invalid_request_error"}}
        size = self.dimensions or int(body.get("dimensions") or 1536)
        texts = body["input"] if isinstance(body["input"], list) else [body["input"]]
        data = [{"object": "embedding", "index": i, "embedding": self.vector(t, size)} for i, t in enumerate(texts)]
        return 200, {"object": "list", "data": list(reversed(data)), "model": body.get("model")}


@contextmanager
def fake_embeddings_server(**behaviour: Any) -> Iterator[FakeEmbeddingsServer]:
    """A FakeEmbeddingsServer listening on 127.0.0.1 (a free port) until the block ends."""
    fake = FakeEmbeddingsServer(**behaviour)

    class Handler(BaseHTTPRequestHandler):
        def do_POST(self) -> None:
            body = json.loads(self.rfile.read(int(self.headers.get("Content-Length") or 0)) or b"{}")
            fake.requests.append({"path": self.path, "headers": dict(self.headers), "body": body})
            if fake.delay_s:
                time.sleep(fake.delay_s)
            status, answer = fake.answer(body) if self.path == "/v1/embeddings" else (404, {"error": "no such path"})
            payload = json.dumps(answer).encode()
            try:
                self.send_response(status)
                self.send_header("Content-Type", "application/json")
                self.send_header("Content-Length", str(len(payload)))
                self.end_headers()
                self.wfile.write(payload)
            except (BrokenPipeError, ConnectionResetError):
                pass  # the client stopped waiting (a timeout test)

        def log_message(self, *args: Any) -> None:  # quiet
            pass

    server = ThreadingHTTPServer(("127.0.0.1", 0), Handler)
    server.daemon_threads = True
    thread = threading.Thread(target=server.serve_forever, daemon=True)
    thread.start()
    fake.url = f"http://127.0.0.1:{server.server_address[1]}/v1"
    try:
        yield fake
    finally:
        server.shutdown()
        server.server_close()
