"""The `kiwi` command's entry point: `kiwi run` and `kiwi search` handed to a warm agent.

When a `kiwi agent` runs for the same user, identity and registry, `kiwi run` and `kiwi search`
hand their call to it through a unix socket and import almost nothing themselves (this module
uses the standard library only: no psycopg, no MCP SDK, no httpx). The agent forks a child that
already holds every module the command needs; the child takes this process's stdin, stdout and
stderr (passed over the socket), its arguments, environment, directory and umask, and runs the
same `main()` a cold `kiwi` runs, so output, errors and exit codes are the same byte for byte.
Any other command, or no agent answering, or an agent that is not exactly ours, is today's path:
`runner.cli.main`.

What "exactly ours" means, checked before anything is sent:

* the socket's directory ($XDG_RUNTIME_DIR/kiwi, else /tmp/kiwi-agent-<uid>) is a directory, not
  a link, owned by this user with mode 0700; the socket is a socket owned by this user, mode 0600;
* the process listening is this user (SO_PEERCRED, which the agent checks of us too);
* its greeting names the identity it acts as and the database it serves, and both equal what
  this process would use: `target()`, which reads the same settings `Settings.load()` does
  (tests/test_cli_agent.py holds them equal). The agent's child checks again with `Settings`
  itself, and refuses a call whose identity or database differ from its own.

KIWI_AGENT=off never tries the socket.
"""

from __future__ import annotations

import os
import sys

PROTOCOL = 1
WARM_COMMANDS = ("run", "search")
DEFAULT_DB_PORT = 5494  # runner/config.py's; tests/test_cli_agent.py holds them equal
STACK_RUNNER_LOGIN = "kiwi_runner:kiwi_runner"
GREETING_LIMIT = 4096


def entrypoint() -> None:
    """The `kiwi` console script: the warm path when it answers, else runner.cli.main's."""
    code = try_warm(sys.argv[1:])
    if code is not None:
        os._exit(code)
    from .main import entrypoint as cold

    cold()


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
    file = _config(env)
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
        identity = "token " + _digest(token)[:16]
    elif os.path.exists(_session_file(env)):
        return None  # a `kiwi login` session is refreshed by the cold path (runner/cli/session.py)
    else:
        identity = "local owner" if backend == "postgres" else "anon"
    return {
        "identity": identity,
        "database": f"{backend} {_without_password(database)}",
        "fingerprint": _digest("\0".join((backend, database, identity, token or ""))),
    }


def socket_path(env: dict[str, str] | os._Environ[str], stated: dict[str, str]) -> str:
    """The socket of the agent for this identity and registry: one agent per pair."""
    return os.path.join(socket_dir(env), f"agent-{stated['fingerprint'][:24]}.sock")


def try_warm(argv: list[str]) -> int | None:
    """The command's exit code when an agent ran it, else None (nothing was written: go cold)."""
    env = os.environ
    if warm_command(argv) is None or (env.get("KIWI_AGENT") or "").strip().lower() in ("off", "0", "no", "false"):
        return None
    stated = target(env, admin=admin_flag(argv))
    if stated is None:
        return None
    path = socket_path(env, stated)
    if not _ours(os.path.dirname(path), directory=True) or not _ours(path, directory=False):
        return None
    try:
        return _hand_over(path, stated, argv)
    except (OSError, ValueError, AttributeError, TypeError):  # before the call started: nothing was done
        return None


def _ours(path: str, *, directory: bool) -> bool:
    """A directory (mode 0700) or a socket (no access for group or others) of this user, no link."""
    import stat

    try:
        st = os.lstat(path)
    except OSError:
        return False
    kind = stat.S_ISDIR(st.st_mode) if directory else stat.S_ISSOCK(st.st_mode)
    return kind and st.st_uid == os.getuid() and st.st_mode & 0o077 == 0


def _hand_over(path: str, stated: dict[str, str], argv: list[str]) -> int | None:
    import json
    import socket
    import struct

    conn = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)
    conn.settimeout(2.0)  # for the greeting and the start; the call itself takes what it takes
    conn.connect(path)
    _, uid, _ = struct.unpack("3i", conn.getsockopt(socket.SOL_SOCKET, socket.SO_PEERCRED, 12))
    if uid != os.getuid():
        conn.close()
        return None
    reader = conn.makefile("rb")
    greeting = json.loads(reader.readline(GREETING_LIMIT) or b"null")
    if not isinstance(greeting, dict) or greeting.get("protocol") != PROTOCOL:
        return None
    if {k: greeting.get(k) for k in stated} != stated:
        return None  # another identity or database: not ours to use
    request = {
        "argv": argv,
        "prog": sys.argv[0],
        "env": dict(os.environ),
        "cwd": os.getcwd(),
        "umask": _umask(),
        "stdio": [_stream(s) for s in (sys.stdin, sys.stdout, sys.stderr)],
    }
    conn.settimeout(None)  # once asked, the child answers: it runs the call or refuses it, never both
    data = json.dumps(request).encode() + b"\n"
    fds = struct.pack("3i", 0, 1, 2)
    sent = conn.sendmsg([data], [(socket.SOL_SOCKET, socket.SCM_RIGHTS, fds)])
    conn.sendall(data[sent:])
    started = json.loads(reader.readline(GREETING_LIMIT) or b"null")
    if not isinstance(started, dict) or "pid" not in started:
        return None  # refused before anything was written: the cold path runs
    _forward_signals(int(started["pid"]))
    try:  # from here on the call is the agent's: never run twice, whatever happens
        ended = json.loads(reader.readline(GREETING_LIMIT) or b"null")
    except (OSError, ValueError):
        ended = None
    if isinstance(ended, dict) and isinstance(ended.get("exit"), int):
        return int(ended["exit"])
    print("kiwi: the agent's call ended without an exit code (kiwi agent stopped?)", file=sys.stderr)
    return 1


def _forward_signals(child: int) -> None:
    """Ctrl-C and a kill reach the child running the call, as they would reach a cold kiwi."""
    import signal

    def forward(signum: int, _frame: object) -> None:
        try:  # noqa: SIM105 (contextlib is an import this path does without)
            os.kill(child, signum)
        except OSError:
            pass

    for signum in (signal.SIGINT, signal.SIGTERM, signal.SIGHUP):
        signal.signal(signum, forward)


def _stream(stream: object) -> list[object]:
    """How a standard stream writes (the child writes the same way, to the same file)."""
    return [getattr(stream, k) for k in ("encoding", "errors", "line_buffering", "write_through")]


def _umask() -> int:
    mask = os.umask(0o022)
    os.umask(mask)
    return mask


def _config(env: dict[str, str] | os._Environ[str]) -> dict[str, object] | None:
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


def _session_file(env: dict[str, str] | os._Environ[str]) -> str:
    """runner/cli/session.py's session_file(), without pathlib."""
    base = env.get("XDG_CONFIG_HOME") or os.path.join(env.get("HOME") or os.path.expanduser("~"), ".config")
    return os.path.join(os.path.expanduser(base), "kiwi", "session.json")


def _digest(text: str) -> str:
    import hashlib

    return hashlib.sha256(text.encode("utf-8", "surrogatepass")).hexdigest()


def _without_password(url: str) -> str:
    """A URL as it may be shown: scheme://user@host/..., its password left out."""
    scheme, sep, rest = url.partition("://")
    login, at, place = rest.rpartition("@")
    if not sep or not at:
        return url
    return f"{scheme}://{login.partition(':')[0]}@{place}"
