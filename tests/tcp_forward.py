"""A TCP forwarder: a real listening port that passes every connection on to another address.

A test puts the suite's database behind a port of its own choosing (never the stack's default)
to see that a command really reaches the port it was told, and counts the connections that
came through: a command that fell back to the default port leaves the count unchanged.

With `database`, it is a PostgreSQL forwarder that sends every connection to that database,
whichever one the client named: a command that can name only the stack's port (`kiwi` with
KIWI_DB_PORT alone reaches the `postgres` database) reaches the suite's own database instead.
"""

from __future__ import annotations

import contextlib
import selectors
import socket
import struct
import threading
from collections.abc import Iterator


class Forwarder:
    """Listens on 127.0.0.1:`port` (a free one, never one of `avoid`) and forwards each
    connection to `target`; `accepted` counts the connections so far."""

    def __init__(self, target: tuple[str, int], *, avoid: tuple[int, ...] = (), database: str | None = None) -> None:
        self.target = target
        self.database = database
        self.accepted = 0
        self._listener = _listen(avoid)
        self.port = int(self._listener.getsockname()[1])
        self._stopping = threading.Event()
        self._threads: list[threading.Thread] = []

    def start(self) -> None:
        thread = threading.Thread(target=self._accept, name="tcp-forward", daemon=True)
        thread.start()
        self._threads.append(thread)

    def close(self) -> None:
        self._stopping.set()
        self._listener.close()
        for thread in self._threads:
            thread.join(timeout=5)

    def _accept(self) -> None:
        self._listener.settimeout(0.2)
        while not self._stopping.is_set():
            try:
                client, _ = self._listener.accept()
            except TimeoutError:
                continue
            except OSError:
                return
            self.accepted += 1
            thread = threading.Thread(target=self._pump, args=(client,), daemon=True)
            thread.start()
            self._threads.append(thread)

    def _pump(self, client: socket.socket) -> None:
        """Copy bytes both ways until either side closes (or the forwarder does)."""
        try:
            upstream = socket.create_connection(self.target, timeout=10)
        except OSError:
            client.close()
            return
        if self.database is not None and not _start_in(self.database, client, upstream):
            client.close()
            upstream.close()
            return
        with client, upstream, selectors.DefaultSelector() as sel:
            sel.register(client, selectors.EVENT_READ, upstream)
            sel.register(upstream, selectors.EVENT_READ, client)
            while not self._stopping.is_set():
                for key, _ in sel.select(timeout=0.2):
                    source: socket.socket = key.fileobj  # type: ignore[assignment]
                    try:
                        data = source.recv(65536)
                        if not data:
                            return
                        key.data.sendall(data)
                    except OSError:
                        return


# PostgreSQL's first messages (protocol 3.0): a request for TLS or GSS encryption, or the startup
SSL_REQUEST, GSSENC_REQUEST, PROTOCOL_3 = 80877103, 80877104, 196608


def _read(sock: socket.socket, size: int) -> bytes | None:
    data = b""
    while len(data) < size:
        chunk = sock.recv(size - len(data))
        if not chunk:
            return None
        data += chunk
    return data


def _start_in(database: str, client: socket.socket, upstream: socket.socket) -> bool:
    """Pass a PostgreSQL client's start on, its startup message naming `database`. Encryption is
    declined here ("N"), so the startup message is readable; anything else passes as it is."""
    while True:
        head = _read(client, 8)
        if head is None:
            return False
        length, code = struct.unpack("!ii", head)
        if code in (SSL_REQUEST, GSSENC_REQUEST):
            client.sendall(b"N")
            continue
        body = _read(client, length - 8)
        if body is None:
            return False
        if code == PROTOCOL_3:
            fields = body.rstrip(b"\0").split(b"\0")
            params = dict(zip(fields[::2], fields[1::2], strict=True))
            params[b"database"] = database.encode()
            body = b"".join(k + b"\0" + v + b"\0" for k, v in params.items()) + b"\0"
        upstream.sendall(struct.pack("!ii", 8 + len(body), code) + body)
        return True


def _listen(avoid: tuple[int, ...]) -> socket.socket:
    for _ in range(20):
        sock = socket.socket()
        sock.bind(("127.0.0.1", 0))
        if sock.getsockname()[1] not in avoid:
            sock.listen(64)
            return sock
        sock.close()
    raise RuntimeError(f"no free port outside {avoid}")


@contextlib.contextmanager
def forwarding(
    target: tuple[str, int], *, avoid: tuple[int, ...] = (), database: str | None = None
) -> Iterator[Forwarder]:
    forwarder = Forwarder(target, avoid=avoid, database=database)
    forwarder.start()
    try:
        yield forwarder
    finally:
        forwarder.close()
