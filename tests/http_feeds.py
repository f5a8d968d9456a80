"""A real local HTTP server of streamed and paged answers, for the http_client tests through
`kiwi run` and MCP `execute`. It runs in a thread on 127.0.0.1:0.

Routes:
  /sse?n=N&gap=S&done=1  N server-sent events (`data: {"n": i}`, the last named `last`), S
                         seconds apart, each written and flushed on its own chunk; with done,
                         a final `data: [DONE]`
  /ndjson?n=N&gap=S      N lines of JSON, application/x-ndjson, chunked
  /chunks?n=N&gap=S      N text chunks `part i;` as text/plain, chunked
  /pages?page=P&of=T     {"items": [...two items of page P...]} (no items beyond page T)
  /cursor?cursor=C       three pages by cursor: {"data": [...], "next": "c2" | "c3" | null}
  /linked?p=P&of=T       a list, with a `Link: <...>; rel="next"` header until page T
  /bodylink?p=P&to=URL   {"results": [P], "next": "/bodylink?p=P+1" (to, when given)}
"""

from __future__ import annotations

import json
import threading
import time
from collections.abc import Iterator
from contextlib import contextmanager
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from typing import Any
from urllib.parse import parse_qs, urlsplit


class _Handler(BaseHTTPRequestHandler):
    protocol_version = "HTTP/1.1"
    disable_nagle_algorithm = True

    def log_message(self, format: str, *args: object) -> None:
        pass

    def do_GET(self) -> None:
        parts = urlsplit(self.path)
        q = {k: v[0] for k, v in parse_qs(parts.query).items()}
        self.server.seen.append(self.path)  # type: ignore[attr-defined]
        route = parts.path.strip("/")
        n, gap = int(q.get("n", 3)), float(q.get("gap", 0))
        if route == "sse":
            events = [f"data: {json.dumps({'n': i})}\n\n" for i in range(1, n)]
            events.append(f"event: last\ndata: {json.dumps({'n': n})}\nid: {n}\n\n")
            if q.get("done"):
                events.append("data: [DONE]\n\n: a comment after the end\n\n")
            self._chunked("text/event-stream", [": keep-alive\n\n", *events], gap)
        elif route == "ndjson":
            self._chunked("application/x-ndjson", [json.dumps({"line": i}) + "\n" for i in range(1, n + 1)], gap)
        elif route == "chunks":
            self._chunked("text/plain", [f"part {i};" for i in range(1, n + 1)], gap)
        elif route == "pages":
            page, of = int(q.get("page", 0)), int(q.get("of", 3))
            items = [f"p{page}-a", f"p{page}-b"] if 1 <= page <= of else []
            self._json({"items": items, "page": page})
        elif route == "cursor":
            following = {None: "c2", "c2": "c3", "c3": None}
            cursor = q.get("cursor")
            self._json({"data": [{"at": cursor or "start"}], "next": following.get(cursor)})
        elif route == "linked":
            p, of = int(q.get("p", 1)), int(q.get("of", 3))
            link = f'</linked?p={p + 1}&of={of}>; rel="next"' if p < of else None
            self._json([p * 10, p * 10 + 1], link=link)
        elif route == "bodylink":
            p = int(q.get("p", 1))
            nxt = q["to"] if "to" in q else f"/bodylink?p={p + 1}" if p < 3 else None
            self._json({"results": [p], "next": nxt})
        else:
            self._json({"error": "no such route"}, status=404)

    def _json(self, body: Any, *, status: int = 200, link: str | None = None) -> None:
        data = json.dumps(body).encode()
        self.send_response(status)
        self.send_header("Content-Type", "application/json")
        self.send_header("Content-Length", str(len(data)))
        if link:
            self.send_header("Link", link)
        self.end_headers()
        self.wfile.write(data)

    def _chunked(self, content_type: str, pieces: list[str], gap: float) -> None:
        self.send_response(200)
        self.send_header("Content-Type", content_type)
        self.send_header("Transfer-Encoding", "chunked")
        self.send_header("Cache-Control", "no-cache")
        self.end_headers()
        for piece in pieces:
            data = piece.encode()
            self.wfile.write(b"%x\r\n%s\r\n" % (len(data), data))
            self.wfile.flush()
            if gap:
                time.sleep(gap)
        self.wfile.write(b"0\r\n\r\n")
        self.wfile.flush()


@contextmanager
def feeds() -> Iterator[tuple[str, list[str]]]:
    """The server's base URL and the list of request paths it has seen."""
    server = ThreadingHTTPServer(("127.0.0.1", 0), _Handler)
    server.daemon_threads = True
    seen: list[str] = []
    server.seen = seen  # type: ignore[attr-defined]
    thread = threading.Thread(target=server.serve_forever, daemon=True)
    thread.start()
    try:
        yield f"http://127.0.0.1:{server.server_address[1]}", seen
    finally:
        server.shutdown()
        server.server_close()
