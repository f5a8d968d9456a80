"""Which agent a `kiwi` command may hand its call to: the identity it acts as and the registry it
uses, as `Settings.load()` and `Settings.principal()` decide them, and where that agent's socket
is. The standard library only (and runner/stack_port.py's default port): runner/cli/warm.py
(the client) and runner/cli/agent.py (the agent) both use it, and tests/test_cli_agent.py holds
`target()` equal to what `Settings` says.
"""

from __future__ import annotations

import os
from collections.abc import Callable

from ..stack_port import DEFAULT_DB_PORT

PROTOCOL = 2
FRAME_LIMIT = 8 << 20  # an environment and argv, however large, fit
WARM_COMMANDS = ("run", "search")
STACK_RUNNER_LOGIN = "kiwi_runner:kiwi_runner"


def warm_command(argv: list[str]) -> str | None:
    """`run` or `search` when argv names one of them (after the global --admin), else None."""
    for arg in argv:
        if arg == "--admin":
            continue
        return arg if arg in WARM_COMMANDS else None
    return None


def admin_flag(argv: list[str]) -> bool:
    """Whether the global --admin comes before the command (where `kiwi` reads it)."""
    command = warm_command(argv)
    return command is not None and "--admin" in argv[: argv.index(command)]


def socket_dir(env: dict[str, str] | os._Environ[str]) -> str:
    """Where agents' sockets live: $XDG_RUNTIME_DIR/kiwi, else /tmp/kiwi-agent-<uid>."""
    runtime = env.get("XDG_RUNTIME_DIR") or ""
    if runtime.startswith("/"):
        return os.path.join(runtime, "kiwi")
    return f"/tmp/kiwi-agent-{os.getuid()}"


def target(env: dict[str, str] | os._Environ[str], admin: bool = False) -> dict[str, str] | None:
    """The identity this process acts as and the registry it uses, as Settings.load() and
    Settings.principal() decide them, or None when that cannot be told cheaply (a config.toml
    that does not parse, a stored `kiwi login` session, a setting Settings would refuse): the
    cold path then runs, and says what it says."""
    file = config(env)
    if file is None:
        return None
    db, rest = file.get("database") or {}, file.get("supabase") or {}
    if not isinstance(db, dict) or not isinstance(rest, dict):
        return None
    supabase_url = env.get("SUPABASE_URL") or rest.get("url")
    explicit_db = env.get("KIWI_DATABASE_URL") or db.get("url")
    backend = env.get("KIWI_BACKEND") or file.get("backend")
    if backend is None:
        backend = "rest" if supabase_url and not explicit_db else "postgres"
    if backend == "postgres":
        port = (env.get("KIWI_DB_PORT") or "").strip() or str(DEFAULT_DB_PORT)
        if not (port.isascii() and port.isdigit() and not port.startswith("0") and int(port) <= 65535):
            return None
        database = str(explicit_db or f"postgresql://{STACK_RUNNER_LOGIN}@127.0.0.1:{port}/postgres")
    elif backend == "rest" and supabase_url:
        database = str(supabase_url)
    else:
        return None
    flag = (env.get("KIWI_ADMIN") or "").strip().lower()
    if flag not in ("", "0", "false", "no", "1", "true", "yes"):
        return None
    token = env.get("KIWI_ACCESS_TOKEN") or None
    if admin or flag in ("1", "true", "yes"):
        identity = "service_role"
    elif token:
        identity = "token " + digest(token)[:16]
    elif os.path.exists(session_file(env)):
        return None  # a `kiwi login` session is refreshed by the cold path (runner/cli/session.py)
    else:
        identity = "local owner" if backend == "postgres" else "anon"
    return {
        "identity": identity,
        "database": f"{backend} {without_password(database)}",
        "fingerprint": digest("\0".join((backend, database, identity, token or ""))),
    }


def socket_path(env: dict[str, str] | os._Environ[str], stated: dict[str, str]) -> str:
    """The socket of the agent for this identity and registry: one agent per pair."""
    return os.path.join(socket_dir(env), f"agent-{stated['fingerprint'][:24]}.sock")


def config(env: dict[str, str] | os._Environ[str]) -> dict[str, object] | None:
    """config.toml as Settings.load() reads it ({} when there is none), None when it does not parse."""
    path = env.get("KIWI_CONFIG", "config.toml")
    if not os.path.isfile(path):
        return {}
    import tomllib

    try:
        with open(path, "rb") as f:
            return tomllib.load(f)
    except (OSError, ValueError):
        return None


def session_file(env: dict[str, str] | os._Environ[str]) -> str:
    """runner/cli/session.py's session_file(), without pathlib."""
    base = env.get("XDG_CONFIG_HOME") or os.path.join(env.get("HOME") or os.path.expanduser("~"), ".config")
    return os.path.join(os.path.expanduser(base), "kiwi", "session.json")


def digest(text: str) -> str:
    """SHA-256, from the interpreter's own module when it has one (hashlib loads OpenSSL: ~4 ms)."""
    try:
        from _sha2 import sha256  # type: ignore[import-not-found]  # Python 3.12+
    except ImportError:
        try:
            from _sha256 import sha256  # type: ignore[import-not-found]
        except ImportError:
            from hashlib import sha256
    return str(sha256(text.encode("utf-8", "surrogatepass")).hexdigest())


def frame(message: dict[str, object]) -> bytes:
    """A message on the agent's socket: its length (4 bytes, big-endian), then the message in
    marshal's format (built in: json would import re, ~15 ms). Both ends have checked with
    SO_PEERCRED that the other is this user before they read a frame."""
    import marshal

    body = marshal.dumps(message)
    return len(body).to_bytes(4, "big") + body


def read_frame(
    recv: Callable[[int], bytes], pending: bytes = b"", limit: int = FRAME_LIMIT
) -> tuple[dict[str, object] | None, bytes]:
    """The next frame's message (None: the peer closed, or sent what is not one) and the bytes
    read past it; `pending` is what was read already."""
    data = pending
    while True:
        if len(data) >= 4:
            size = int.from_bytes(data[:4], "big")
            if size > limit:
                return None, b""
            if len(data) >= 4 + size:
                import marshal

                try:
                    message = marshal.loads(data[4 : 4 + size])
                except (ValueError, EOFError, TypeError):
                    return None, b""
                return (message if isinstance(message, dict) else None), data[4 + size :]
        chunk = recv(65536)
        if not chunk:
            return None, b""
        data += chunk


def without_password(url: str) -> str:
    """A URL as it may be shown: scheme://user@host/..., its password left out."""
    scheme, sep, rest = url.partition("://")
    login, at, place = rest.rpartition("@")
    if not sep or not at:
        return url
    return f"{scheme}://{login.partition(':')[0]}@{place}"
