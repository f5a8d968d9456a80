"""The listening TCP socket `kiwi serve` and `kiwi console` serve on, with errors that say
why there is none (a taken port, no permission, an unknown host)."""

from __future__ import annotations

import errno
import socket

from ..errors import UsageError

__all__ = ["bind", "netloc"]


def bind(host: str, port: int, *, reuse_port: bool = False, listen: bool = True) -> socket.socket:
    """A listening socket on host:port, or a UsageError saying why there is none (with
    `reuse_port`, one of several on the port; without `listen`, bound only)."""
    if not 0 <= port <= 65535:
        raise UsageError(f"--port {port} is not a port", hint="ports are 1 to 65535 (0: any free one)")
    try:
        family, kind, proto, _, address = socket.getaddrinfo(
            host, port, type=socket.SOCK_STREAM, flags=socket.AI_PASSIVE
        )[0]
    except socket.gaierror as e:
        raise UsageError(
            f"cannot listen on {host!r}: {e.strerror}", hint="--host is an address of this machine"
        ) from None
    sock = socket.socket(family, kind, proto)
    try:
        sock.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
        if reuse_port:
            sock.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEPORT, 1)
        sock.bind(address)
        if listen:
            sock.listen(2048)
    except OSError as e:
        sock.close()
        where = netloc(host, port)
        if e.errno == errno.EADDRINUSE:
            raise UsageError(
                f"cannot serve on {where}: the port is already in use",
                hint="stop what is listening there, or choose another port with --port",
            ) from None
        if e.errno == errno.EACCES:
            raise UsageError(
                f"cannot serve on {where}: permission denied", hint="ports below 1024 need privileges; use --port"
            ) from None
        raise UsageError(f"cannot serve on {where}: {e.strerror or e}", hint="check --host and --port") from None
    sock.set_inheritable(False)
    return sock


def netloc(host: str, port: int) -> str:
    return f"[{host}]:{port}" if ":" in host else f"{host}:{port}"
