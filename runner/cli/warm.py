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
  this process would use: `target()` (runner/cli/warm_target.py), which reads the same
  settings `Settings.load()` does (tests/test_cli_agent.py holds them equal). The agent's
  child checks again with `Settings` itself, and refuses a call whose identity or database
  differ from its own.

KIWI_AGENT=off never tries the socket. The messages are length-prefixed marshal frames (warm_target.frame),
read only after SO_PEERCRED said the other end is this user.
"""

from __future__ import annotations

import os
import sys

from .warm_target import PROTOCOL, admin_flag, frame, read_frame, socket_path, target, warm_command

TYPE_CHECKING = False
if TYPE_CHECKING:
    from typing import Any

GREETING_LIMIT = 4096


def entrypoint() -> None:
    """The `kiwi` console script: the warm path when it answers, else runner.cli.main's."""
    code = try_warm(sys.argv[1:])
    if code is not None:
        os._exit(code)
    from .main import entrypoint as cold

    cold()


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
    except (OSError, ValueError, AttributeError, TypeError, OverflowError):  # before the call started: nothing done
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
    import _socket  # the socket module's core: `socket` itself imports enum and selectors (~7 ms)

    conn = _socket.socket(_socket.AF_UNIX, _socket.SOCK_STREAM)
    try:
        conn.settimeout(2.0)  # for the greeting; the call itself takes what it takes
        conn.connect(path)
        peer = conn.getsockopt(_socket.SOL_SOCKET, _socket.SO_PEERCRED, 12)
        if int.from_bytes(peer[4:8], sys.byteorder) != os.getuid():
            return None  # another user listens there: never read what it says
        greeting, _ = read_frame(conn.recv, limit=GREETING_LIMIT)
        if greeting is None or greeting.get("protocol") != PROTOCOL:
            return None
        if {k: greeting.get(k) for k in stated} != stated:
            return None  # another identity or database: not ours to use
        return _call(conn, argv)
    finally:
        conn.close()


def _call(conn: Any, argv: list[str]) -> int | None:
    import _socket

    request = {
        "argv": argv,
        "prog": sys.argv[0],
        "env": dict(os.environ),
        "cwd": os.getcwd(),
        "umask": _umask(),
        "stdio": [_stream(s) for s in (sys.stdin, sys.stdout, sys.stderr)],
    }
    conn.settimeout(None)  # once asked, the child answers: it runs the call or refuses it, never both
    data = frame(request)
    fds = b"".join(fd.to_bytes(4, sys.byteorder) for fd in (0, 1, 2))
    sent = conn.sendmsg([data], [(_socket.SOL_SOCKET, _socket.SCM_RIGHTS, fds)])
    conn.sendall(data[sent:])
    started, rest = read_frame(conn.recv, limit=GREETING_LIMIT)
    if started is None or not isinstance(started.get("pid"), int):
        return None  # refused before anything was written: the cold path runs
    _forward_signals(int(started["pid"]))  # type: ignore[call-overload]
    try:  # from here on the call is the agent's: never run twice, whatever happens
        ended, _ = read_frame(conn.recv, rest, limit=GREETING_LIMIT)
    except OSError:
        ended = None
    if ended is not None and isinstance(ended.get("exit"), int):
        return int(ended["exit"])  # type: ignore[call-overload]
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
