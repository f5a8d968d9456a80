"""A TCP forwarder: a real listening port that passes every connection on to another address.

A test puts the suite's database behind a port of its own choosing (never the stack's default)
to see that a command really reaches the port it was told, and counts the connections that
came through: a command that fell back to the default port leaves the count unchanged.
"""

from __future__ import annotations

import contextlib
import selectors
import socket
import threading
from collections.abc import Iterator


class Forwarder:
    """Listens on 127.0.0.1:`port` (a free one, never one of `avoid`) and forwards each
    connection to `target`; `accepted` counts the connections so far."""

    def __init__(self, target: tuple[str, int], *, avoid: tuple[int, ...] = ()) -> None:
        self.target = target
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
def forwarding(target: tuple[str, int], *, avoid: tuple[int, ...] = ()) -> Iterator[Forwarder]:
    forwarder = Forwarder(target, avoid=avoid)
    forwarder.start()
    try:
        yield forwarder
    finally:
        forwarder.close()
