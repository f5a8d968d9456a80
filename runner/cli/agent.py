"""`kiwi agent`: a resident process that makes `kiwi run` and `kiwi search` start warm.

The agent imports, once, everything those two commands use (the runner, the registry's driver,
search and its bundled model) and listens on a unix socket only its user can open
(runner/cli/warm.py says what the client checks, runner/cli/warm_target.py where). For each
call it forks a child: the child takes the caller's stdin, stdout and stderr (passed over the socket), arguments,
environment, directory and umask, checks with `Settings` that the caller acts as the same
identity on the same registry as the agent (else it refuses, and the caller runs cold), and
runs the same `main()` a cold `kiwi` runs. A call is thus as isolated as a fresh process, and
its output and exit code are the same; it only skips the imports.

The agent is a separate command, not part of `kiwi serve`: forking is safe only from a process
that runs no event loop and no other thread when it forks, which a server cannot promise.
"""

from __future__ import annotations

import argparse
import contextlib
import gc
import io
import os
import shutil
import signal
import socket
import stat
import struct
import sys
import threading
from collections.abc import Callable
from pathlib import Path
from typing import TYPE_CHECKING, Any

from ..errors import UsageError
from . import warm_target

if TYPE_CHECKING:
    from ..config import Settings


AGENT_HELP = """\
Keep `kiwi run` and `kiwi search` warm: while this runs, they hand their call to it over a unix
socket only you can open ($XDG_RUNTIME_DIR/kiwi, else /tmp/kiwi-agent-<uid>), and skip the
imports a fresh process pays (psycopg, the runner, search's model). Each call runs in a child
forked from the agent, with the caller's arguments, environment, directory and terminal: output,
errors and exit codes are those of a cold `kiwi`. An agent serves one identity on one registry,
the ones its environment names (KIWI_DATABASE_URL or KIWI_DB_PORT, SUPABASE_URL,
KIWI_ACCESS_TOKEN, KIWI_ADMIN or --admin, config.toml); a caller acting as anyone else, or
on another registry, runs cold. A stored `kiwi login` session is never served warm.
KIWI_AGENT=off makes a command ignore any agent."""


def add_agent_command(
    sub: Any, run: Callable[[list[str]], int], parser: Callable[[str], argparse.ArgumentParser]
) -> None:
    """Define `kiwi agent` on the `kiwi` parser's subparsers; `run` is what a forked call runs and
    `parser` a command's parser (runner/cli/main.py's run_forked and build_parser: the agent does
    not import the module that defines them)."""
    agent = sub.add_parser(
        "agent",
        help="keep `kiwi run` and `kiwi search` warm for this identity and registry (runs until stopped)",
        description=AGENT_HELP,
        formatter_class=argparse.RawDescriptionHelpFormatter,
    )
    agent.add_argument(
        "--idle-timeout",
        type=float,
        default=0.0,
        metavar="S",
        help="stop after S seconds without a call (default 0: run until stopped)",
    )
    agent.add_argument("--where", action="store_true", help="print the socket's path and exit")
    agent.set_defaults(handler=cmd_agent, run=run, parser=parser)


def settings_target(settings: Settings) -> dict[str, str]:
    """The identity and registry a process with these settings uses, in warm_target.target()'s form, from
    the settings themselves: what the agent serves, and what each call must match."""
    backend, token = settings.backend, settings.supabase_access_token or None
    database = settings.database_url if backend == "postgres" else str(settings.supabase_url)
    if settings.admin:
        identity = "service_role"
    elif token:
        identity = "token " + warm_target.digest(token)[:16]
    else:
        identity = "local owner" if backend == "postgres" else "anon"
    return {
        "identity": identity,
        "database": f"{backend} {warm_target.without_password(database)}",
        "fingerprint": warm_target.digest("\0".join((backend, database, identity, token or ""))),
    }


def cmd_agent(args: argparse.Namespace) -> int:
    """Not a coroutine: main() runs it outside any event loop, so that it may fork."""
    from ..config import Settings

    stated = settings_target(Settings.load())
    if warm_target.target(os.environ) != stated:
        raise UsageError(
            "this identity is not served by an agent",
            hint="a `kiwi login` session is refreshed by each command; use KIWI_ACCESS_TOKEN, or run without the agent",
        )
    path = warm_target.socket_path(os.environ, stated)
    if args.where:
        print(path)
        return 0
    shared = _warm_up()  # before the socket exists: a caller never waits for the imports
    try:
        for command in warm_target.WARM_COMMANDS:  # argparse's patterns compiled once, for every child
            args.parser(command).parse_args([command, "x"])
        gc.freeze()  # what is loaded stays out of the children's collections: fewer pages copied on write
        listener, made = _listen(path)
        print(f"kiwi agent: {stated['identity']} on {stated['database']}, at {path}", file=sys.stderr, flush=True)
        try:
            _serve(listener, stated, args.idle_timeout, args.run)
        finally:
            with contextlib.suppress(OSError):
                if os.lstat(path).st_ino == made:  # ours still, not a newer agent's
                    os.unlink(path)
            listener.close()
    finally:
        if shared is not None:
            shutil.rmtree(shared, ignore_errors=True)
    return 0


def _listen(path: str) -> tuple[socket.socket, int]:
    """The agent's socket, mode 0600 in a directory of ours with mode 0700; never another's."""
    folder = os.path.dirname(path)
    with contextlib.suppress(FileExistsError):
        os.mkdir(folder, 0o700)
    st = os.lstat(folder)
    if not stat.S_ISDIR(st.st_mode) or st.st_uid != os.getuid() or st.st_mode & 0o077:
        raise UsageError(
            f"{folder} is not a directory of yours with mode 0700", hint="remove it, or set XDG_RUNTIME_DIR"
        )
    with contextlib.suppress(OSError), socket.socket(socket.AF_UNIX, socket.SOCK_STREAM) as probe:
        probe.connect(path)
        raise UsageError(f"an agent already serves this identity and registry at {path}")
    listener = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)
    fresh = f"{path}.{os.getpid()}"
    with contextlib.suppress(FileNotFoundError):
        os.unlink(fresh)
    mask = os.umask(0o177)
    try:
        listener.bind(fresh)
    finally:
        os.umask(mask)
    os.chmod(fresh, 0o600)
    os.replace(fresh, path)  # a stale socket of a dead agent is replaced at once
    listener.listen(128)
    return listener, os.lstat(path).st_ino


def _warm_up() -> Path | None:
    """What `kiwi run` and `kiwi search` import when they run, loaded once, before any fork
    (tests/test_cli_agent.py checks that a call imports nothing more)."""
    import asyncio  # noqa: F401
    import concurrent.futures.thread  # noqa: F401

    import psycopg  # noqa: F401
    import pyseccomp  # noqa: F401

    from .. import handlers, policy, sandbox  # noqa: F401
    from ..config import Settings
    from ..core import refs, text  # noqa: F401
    from ..harness import run  # noqa: F401
    from ..primitives import http_client, subprocess  # noqa: F401
    from ..registry import plan_cache, postgres, spaces, suggest  # noqa: F401
    from ..sandbox import Sandbox
    from ..sandbox.sandbox import share_state
    from ..search import combined, query  # noqa: F401
    from ..trust import states  # noqa: F401
    from . import search, session  # noqa: F401

    settings = Settings.load()
    shared = None
    if settings.sandbox:  # whether bubblewrap starts here, its /etc and seccomp filter: once, not by every call
        Sandbox().problem()
        shared = share_state()
    if settings.embeddings == "local":  # the bundled model, read once and shared by every child
        from ..search import embedders

        with contextlib.suppress(Exception):
            embedders._wordllama()
    return shared


def _serve(
    listener: socket.socket, stated: dict[str, str], idle_timeout: float, run: Callable[[list[str]], int]
) -> None:
    stop = threading.Event()
    for signum in (signal.SIGTERM, signal.SIGINT, signal.SIGHUP):
        signal.signal(signum, lambda *_: stop.set())
    listener.settimeout(1.0)
    idle = 0.0
    while not stop.is_set():
        _reap()
        try:
            conn, _ = listener.accept()
        except TimeoutError:
            idle += 1.0
            if idle_timeout and idle >= idle_timeout:
                return
            continue
        except InterruptedError:
            continue
        idle = 0.0
        with conn:
            _, uid, _ = struct.unpack("3i", conn.getsockopt(socket.SOL_SOCKET, socket.SO_PEERCRED, 12))
            if uid != os.getuid():
                continue  # another user: closed unanswered
            if os.fork() == 0:  # the child serves the call and never returns here
                listener.close()
                code = 1
                try:
                    code = _call(conn, stated, run)
                finally:
                    os._exit(code)


def _reap() -> None:
    with contextlib.suppress(ChildProcessError):
        while os.waitpid(-1, os.WNOHANG)[0]:
            pass


def _call(conn: socket.socket, stated: dict[str, str], run: Callable[[list[str]], int]) -> int:
    """In the forked child: greet, take the caller's request and stdio, check who it acts as, run."""
    for signum in (signal.SIGTERM, signal.SIGINT, signal.SIGHUP):
        signal.signal(signum, signal.SIG_DFL)
    signal.signal(signal.SIGINT, signal.default_int_handler)  # Ctrl-C is a KeyboardInterrupt, as in a cold kiwi
    os.setpgid(0, 0)  # the agent's terminal's signals are not the call's
    conn.settimeout(10.0)
    conn.sendall(warm_target.frame({"protocol": warm_target.PROTOCOL, **stated, "pid": os.getpid()}))
    request, fds = _receive(conn)
    if request is None or len(fds) != 3:
        return 1
    refusal = _adopt(request, fds, stated)
    if refusal:
        conn.sendall(warm_target.frame({"refused": refusal}))
        return 1
    conn.settimeout(None)
    conn.sendall(warm_target.frame({"pid": os.getpid()}))
    code = run(request["argv"])
    with contextlib.suppress(OSError):
        conn.sendall(warm_target.frame({"exit": code}))
    return code


def _receive(conn: socket.socket) -> tuple[dict[str, Any] | None, list[int]]:
    fds: list[int] = []
    data, ancillary, _, _ = conn.recvmsg(1 << 16, socket.CMSG_SPACE(3 * 4))
    for level, kind, payload in ancillary:
        if level == socket.SOL_SOCKET and kind == socket.SCM_RIGHTS:
            fds.extend(struct.unpack(f"{len(payload) // 4}i", payload[: len(payload) // 4 * 4]))
    request, _ = warm_target.read_frame(conn.recv, data) if data else (None, b"")
    return request, fds


def _adopt(request: dict[str, Any], fds: list[int], stated: dict[str, str]) -> str | None:
    """Become the caller's process: its stdio, directory, umask and environment. A refusal (the
    caller acts as another identity, or on another registry) is said before any output."""
    from ..config import Settings

    try:
        os.chdir(request["cwd"])
        os.umask(int(request["umask"]))
        os.environ.clear()
        os.environ.update(request["env"])
        environ = dict(os.environ)
        if warm_target.admin_flag(request["argv"]):
            environ["KIWI_ADMIN"] = "1"
        if settings_target(Settings.load(environ)) != stated:
            return "another identity or registry"
    except Exception as e:  # whatever it is, the cold path says it
        return f"{type(e).__name__}"
    for target, fd in enumerate(fds):
        os.dup2(fd, target)
        os.close(fd)
    streams = []
    for fd, (encoding, errors, line_buffering, write_through) in enumerate(request["stdio"]):
        raw = open(fd, "rb" if fd == 0 else "wb", buffering=-1, closefd=False)  # noqa: SIM115 (stdio)
        streams.append(io.TextIOWrapper(raw, encoding, errors, "\n", line_buffering, write_through))
    sys.stdin, sys.stdout, sys.stderr = streams
    sys.argv = [request.get("prog") or "kiwi", *request["argv"]]
    return None
