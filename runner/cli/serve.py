"""`kiwi serve`: Kiwi's MCP server (search, load, execute, help) over stdio or streamable HTTP.

    kiwi serve                                   # stdio, for an MCP client that spawns it
    kiwi serve --transport http --port 8765      # streamable HTTP at http://127.0.0.1:8765/mcp
    kiwi serve --directive create_script_tool    # direct mode: that directive's tools, not the meta-tools

Who the calls act as:

* stdio: the server's own principal (Settings.principal(): KIWI_ACCESS_TOKEN's user, else
  the local stack's owner on the Postgres backend), or service_role with `--admin`.
* http: each request's caller. A bearer token is required (a Supabase Auth JWT of the
  project; runner/mcp_server/auth.py); without one the answer is 401. With an authorization
  server configured (SUPABASE_URL's Supabase Auth, or KIWI_AUTH_ISSUER) the 401 names the
  protected resource metadata at /.well-known/oauth-protected-resource/mcp, where MCP clients
  discover it; the local stack has none, so the 401 says `kiwi token` prints a token instead.
  Service-role tokens are accepted only with `--admin`.
  `--insecure-no-auth` (loopback only) serves without tokens as the server's own principal.
  An MCP session left idle for --session-idle-timeout seconds is closed, and one caller holds
  at most --max-sessions-per-user live sessions (runner/mcp_server/http_sessions.py).
  `--processes N` serves from N processes on the one port, nothing shared but Postgres
  (runner/cli/serve_processes.py); each holds its own sessions, and any answers any session.

Wire it into the kiwi CLI with `add_serve_command(sub)` on its subparsers; standalone:
`python -m runner.cli.serve --transport stdio`. Logs go to stderr (stdout is the
protocol on stdio). The registry and cache come from Settings (KIWI_DATABASE_URL, ...).
"""

from __future__ import annotations

import argparse
import asyncio
import contextlib
import dataclasses
import logging
import os
import socket
import sys
from collections.abc import Sequence
from functools import partial
from typing import Any

from .. import telemetry
from ..config import DEFAULT_MAX_SESSIONS_PER_USER, DEFAULT_SESSION_IDLE_S, Settings
from ..errors import KiwiError, UsageError
from ..principal import acting_as, anon
from .listen import bind, netloc
from .long_lived import settle_heap

__all__ = ["add_serve_command", "cmd_serve", "main", "serve"]

logger = logging.getLogger("kiwi.mcp.serve")


def add_serve_command(subparsers: Any) -> argparse.ArgumentParser:
    """Define `serve` on a parser's subparsers (the object `add_subparsers()` returns)."""
    serve_parser: argparse.ArgumentParser = subparsers.add_parser(
        "serve",
        help="serve Kiwi over MCP (tools: search, load, execute, help)",
        description="Serve the Kiwi registry as an MCP server with the tools search, load, execute and help. "
        "Over http every request needs a bearer token (a Supabase Auth access token of the project; "
        "locally, `kiwi token` prints one).",
    )
    serve_parser.add_argument(
        "--transport",
        choices=("stdio", "http"),
        default="stdio",
        help="stdio (default; the client spawns kiwi) or http (streamable HTTP at /mcp)",
    )
    serve_parser.add_argument("--host", default="127.0.0.1", help="http: the address to listen on (default 127.0.0.1)")
    serve_parser.add_argument("--port", type=int, default=8765, help="http: the port to listen on (default 8765)")
    serve_parser.add_argument(
        "--public-url",
        default=None,
        metavar="URL",
        help="http: the URL clients reach the endpoint at, advertised in the protected resource metadata "
        "(default: KIWI_PUBLIC_URL, else http://HOST:PORT/mcp)",
    )
    serve_parser.add_argument(
        "--admin",
        dest="serve_admin",
        action="store_true",
        help="stdio: act as service_role (admin); http: accept service-role tokens. Never the default",
    )
    serve_parser.add_argument(
        "--insecure-no-auth",
        action="store_true",
        help="http on a loopback address only: serve without tokens, every request acting as the "
        "server's own principal (for local experiments; anything on this machine can connect)",
    )
    serve_parser.add_argument(
        "--allow-command-writes",
        action="store_true",
        help="pass writes that choose a command for others (runtimes, primitives, MCP servers, public "
        "tools) to the registry, which lets only an admin make them (default: refused over MCP)",
    )
    serve_parser.add_argument(
        "--local-spaces",
        action="store_true",
        help="run tools of the local spaces (.ai/tools here, ~/.ai/tools) before the registry's, as "
        "`kiwi run` does (default: registry only; config.toml [serve] local_spaces = true)",
    )
    serve_parser.add_argument(
        "--session-idle-timeout",
        type=_positive(float),
        default=None,
        metavar="SECONDS",
        help="http: close an MCP session no request has used for this long; its client opens another "
        f"(default KIWI_SESSION_IDLE_TIMEOUT, else {DEFAULT_SESSION_IDLE_S:g})",
    )
    serve_parser.add_argument(
        "--max-sessions-per-user",
        type=_positive(int),
        default=None,
        metavar="N",
        help="http: live MCP sessions one caller may hold; at the cap a new one closes the caller's "
        "session idle the longest, or is refused (429) when none is idle "
        f"(default KIWI_MAX_SESSIONS_PER_USER, else {DEFAULT_MAX_SESSIONS_PER_USER})",
    )
    serve_parser.add_argument(
        "--processes",
        type=_positive(int),
        default=1,
        metavar="N",
        help="http: serve from N processes on the one port (Linux), nothing shared but Postgres: a supervisor "
        "starts them, starts again one that ends, and stops them all on SIGTERM/SIGINT. Each holds its own "
        "database pool and MCP sessions (--max-sessions-per-user and the idle timeout apply per process); "
        "a request for another process's session is forwarded to it (default 1: one process)",
    )
    serve_parser.add_argument("--process", default=None, help=argparse.SUPPRESS)  # INDEX:DIR, from the supervisor
    serve_parser.add_argument(
        "--directive",
        default=None,
        metavar="REF",
        help="direct mode: serve the tool context of this directive (ref or ref@version) as ordinary MCP "
        "tools instead of the meta-tools, every call through the same gate (runner/mcp_server/direct.py)",
    )
    serve_parser.set_defaults(handler=cmd_serve)
    return serve_parser


async def cmd_serve(args: argparse.Namespace) -> int:
    """The handler `kiwi` calls (async, like its other commands)."""
    if args.transport == "http":
        _with_the_system_allocator()
    processes = getattr(args, "processes", 1)
    process = getattr(args, "process", None)
    if processes > 1 and process is None:
        if args.transport != "http":
            raise UsageError("--processes is for --transport http", hint="a stdio server has one client: drop it")
        await _supervise(args, processes)
        return 0
    await serve(
        args.transport,
        host=args.host,
        port=args.port,
        public_url=args.public_url,
        # `kiwi serve --admin`, or a global `kiwi --admin serve` if the CLI has one
        admin=bool(args.serve_admin or getattr(args, "admin", False)),
        insecure_no_auth=args.insecure_no_auth,
        allow_command_writes=args.allow_command_writes,
        local_spaces=args.local_spaces,
        directive=getattr(args, "directive", None),
        session_idle_timeout=getattr(args, "session_idle_timeout", None),
        max_sessions_per_user=getattr(args, "max_sessions_per_user", None),
        processes=processes,
        process=process,
    )
    return 0


async def _supervise(args: argparse.Namespace, processes: int) -> None:
    """The supervisor of `--processes N`: what every process would refuse is refused once, here."""
    from .serve_processes import supervise

    _log_to_stderr()
    _preflight(Settings.load(), host=args.host, insecure_no_auth=args.insecure_no_auth)
    await supervise(list(sys.orig_argv), host=args.host, port=args.port, processes=processes, say=_say)


async def serve(
    transport: str,
    *,
    host: str = "127.0.0.1",
    port: int = 8765,
    public_url: str | None = None,
    admin: bool = False,
    insecure_no_auth: bool = False,
    allow_command_writes: bool = False,
    local_spaces: bool = False,
    directive: str | None = None,
    session_idle_timeout: float | None = None,
    max_sessions_per_user: int | None = None,
    processes: int = 1,
    process: str | None = None,
) -> None:
    _log_to_stderr()
    settings = Settings.load()
    if local_spaces:
        settings = dataclasses.replace(settings, serve_local_spaces=True)
    if session_idle_timeout is not None:
        settings = dataclasses.replace(settings, session_idle_s=session_idle_timeout)
    if max_sessions_per_user is not None:
        settings = dataclasses.replace(settings, max_sessions_per_user=max_sessions_per_user)
    admin = admin or settings.admin  # KIWI_ADMIN=1 is the same explicit choice as --admin
    if transport == "stdio":
        if insecure_no_auth:
            raise UsageError("--insecure-no-auth is for --transport http", hint="stdio needs no tokens: drop it")
        settings = dataclasses.replace(settings, admin=admin)
        principal = settings.principal()
        async with _served(settings, allow_command_writes, directive) as server:
            _say(f"serving MCP over stdio as {principal.describe()}")
            from ..mcp_server.stdio import serve_stdio  # the wire read and written by the loop, not threads

            settle_heap()
            with acting_as(principal):
                await serve_stdio(server)
    elif transport == "http":
        await _serve_http(
            settings,
            host=host,
            port=port,
            public_url=public_url,
            admin=admin,
            insecure_no_auth=insecure_no_auth,
            allow_command_writes=allow_command_writes,
            directive=directive,
            processes=processes,
            process=process,
        )
    else:
        raise UsageError(f"unknown transport {transport!r}", hint="--transport is stdio or http")


async def _serve_http(
    settings: Settings,
    *,
    host: str,
    port: int,
    public_url: str | None,
    admin: bool,
    insecure_no_auth: bool,
    allow_command_writes: bool,
    directive: str | None = None,
    processes: int = 1,
    process: str | None = None,
) -> None:
    import uvicorn  # the MCP SDK's own server, loaded only when serving

    from ..mcp_server.auth import http_app, http_auth
    from ..mcp_server.auth import public_url as public_url_of
    from ..mcp_server.http_routing import SessionRouter, session_id_prefix
    from ..mcp_server.http_sessions import SessionLimits

    _preflight(settings, host=host, insecure_no_auth=insecure_no_auth)
    # one of the supervisor's processes (`--process I:DIR`), or the only one
    sockets, routed = _sockets(host, port, process, processes)
    sock = sockets[0]
    quiet = routed is not None and routed[0] != 0  # the first of several says what the server is
    try:
        port = sock.getsockname()[1]
        resource = public_url_of(host, port, public_url)
        if insecure_no_auth:
            settings = dataclasses.replace(settings, admin=admin)
            principal = settings.principal()
            auth = None
        else:
            # the process itself acts as nobody: every call acts as its request's verified caller
            settings = dataclasses.replace(settings, admin=False)
            principal = anon()
            auth = http_auth(settings, resource, allow_admin=admin)
        async with _served(settings, allow_command_writes, directive) as server, _operated(settings) as operated:
            limits = SessionLimits(settings.session_idle_s, settings.max_sessions_per_user)
            prefix = "" if routed is None else session_id_prefix(routed[0])
            app = http_app(server, host=host, resource_url=resource, auth=auth, limits=limits, session_prefix=prefix)
            console = _with_console(app, settings, allow_admin=admin)  # a route of the app, before it is wrapped
            router = None
            if routed is not None:  # a request for another process's session goes there
                router = SessionRouter(app, index=routed[0], processes=processes, run_dir=routed[1])
            app = operated(app if router is None else router, principal=principal.describe() if auth is None else None)
            config = uvicorn.Config(app, log_level="warning", lifespan="on", timeout_graceful_shutdown=5)
            if not quiet:
                _banner(host, port, resource, public_url, auth, principal, admin, limits)
            settle_heap()
            try:
                with acting_as(principal):
                    await uvicorn.Server(config).serve(sockets=sockets)
            finally:
                await console.aclose()
                if router is not None:
                    await router.aclose()
    finally:
        for each in sockets:
            each.close()


def _preflight(settings: Settings, *, host: str, insecure_no_auth: bool) -> None:
    """What refuses to start an HTTP server: the sandbox off or failing, no tokens off loopback."""
    from ..mcp_server.auth import is_loopback

    if not settings.sandbox:
        raise UsageError(
            "kiwi serve --transport http refuses to start with the sandbox off (KIWI_SANDBOX=off): "
            "a shared server runs its callers' tools, and every one must run sandboxed",
            hint="unset KIWI_SANDBOX (or [sandbox] enabled = true); the opt-out is for one trusted "
            "single-user machine, over stdio",
        )
    from ..sandbox import Sandbox

    Sandbox().check()  # a server whose every run would be refused does not start

    if insecure_no_auth and not is_loopback(host):
        raise UsageError(
            f"--insecure-no-auth is refused on {host}: only a loopback address may serve without tokens",
            hint="use --host 127.0.0.1, or drop --insecure-no-auth and give clients tokens (kiwi token)",
        )


def _sockets(host: str, port: int, process: str | None, processes: int) -> tuple[list[socket.socket], Any]:
    """The sockets to serve on, and (index, run dir) when this is one of several processes."""
    if process is None:
        # before anything is said: a taken port is an error, not "serving"
        return [bind(host, port)], None
    from ..mcp_server.http_routing import worker_socket
    from .serve_processes import listening_socket, parse_process, unix_socket

    index, run_dir = parse_process(process)
    tcp = listening_socket(host, port)
    return [tcp, unix_socket(worker_socket(run_dir, index))], (index, run_dir)


def _banner(
    host: str,
    port: int,
    resource: str,
    public_url: str | None,
    auth: Any,
    principal: Any,
    admin: bool,
    limits: Any,
) -> None:
    if auth is None:
        _say(f"serving MCP at {resource} (listening on {netloc(host, port)})")
        _say("WARNING: --insecure-no-auth: NO AUTHENTICATION. Anything that can connect to this port")
        _say(f"WARNING: acts as {principal.describe()}. Do not use this beyond local experiments.")
    else:
        admins = "accepted (--admin)" if admin else "refused (start with --admin to accept them)"
        _say(f"serving MCP at {resource} (listening on {netloc(host, port)})")
        if auth.issuer is not None:
            _say(f"requires a bearer token: an access token of {auth.issuer}; service-role tokens {admins}")
        else:
            _say(f"requires a bearer token; service-role tokens {admins}")
        _say(f"sessions: closed after {limits.idle_s:g} s idle; at most {limits.per_user} live per caller")
        if auth.metadata_url is not None:
            _say(f"protected resource metadata: {auth.metadata_url}")
            if host in ("0.0.0.0", "::", "") and not (public_url or os.environ.get("KIWI_PUBLIC_URL")):
                _say("hint: clients cannot reach 0.0.0.0: give --public-url (the URL they use)")
        else:
            _say("no authorization server is configured (SUPABASE_URL or KIWI_AUTH_ISSUER names one),")
            _say("so none is advertised: `kiwi token` prints a token; send `Authorization: Bearer <token>`")


def _with_console(app: Any, settings: Settings, *, allow_admin: bool) -> Any:
    """Mount the web console at /console of the HTTP app (runner/console/): people sign in there
    with the same tokens, and each page acts as its person."""
    from ..console import mounted_console

    mount, console = mounted_console(settings, allow_admin=allow_admin)
    app.router.routes.insert(0, mount)
    return console


@contextlib.asynccontextmanager
async def _operated(settings: Settings) -> Any:
    """What wraps the HTTP app for its operator (runner/mcp_server/http_ops.py): /healthz, /readyz,
    /metrics and the JSON request log, on a registry connection of their own."""
    from ..mcp_server.http_ops import Operated, json_log_handler, registry_probes
    from ..registry import connect
    from ..telemetry.prometheus import prometheus_sink

    json_log_handler()
    registry = connect(settings, one_shot=True)
    status, refresh, queue = registry_probes(registry)
    watching = asyncio.create_task(queue.watch()) if telemetry.started() else None
    metrics = prometheus_sink()
    writing = asyncio.create_task(metrics.keep_gauges()) if metrics.shared else None  # one of several processes
    try:
        yield partial(
            Operated,
            status=status,
            refresh=refresh,
            metrics=metrics,
            metrics_token=os.environ.get("KIWI_METRICS_TOKEN"),
        )
    finally:
        for task in (watching, writing):
            if task is not None:
                task.cancel()
        await registry.aclose()


@contextlib.asynccontextmanager
async def _served(settings: Settings, allow_command_writes: bool, directive: str | None = None) -> Any:
    from ..handlers import standard_dispatcher
    from ..harness.run import Runner
    from ..mcp_client.pool import McpPool
    from ..registry import connect
    from ..search.background import background_embedding

    pool = McpPool()  # the runs' and the imports' (closed with the runner's dispatcher)
    telemetry.set_gauge_source("kiwi.mcp.pool.sessions", lambda: {"": float(len(pool._sessions))})
    dispatcher = standard_dispatcher(mcp_pool=pool)
    runner = Runner(connect(settings), settings, dispatcher=dispatcher, on_progress=partial(logger.info, "%s"))
    from ..registry.postgres import pool_connections

    telemetry.set_gauge_source("kiwi.db.pool.connections", partial(pool_connections, runner.registry.backend))
    try:
        server = await _server(runner, settings, allow_command_writes, directive, pool)
        async with background_embedding(settings):  # what any path published, found by meaning
            yield server
    finally:
        await runner.aclose()


async def _server(runner: Any, settings: Settings, allow_command_writes: bool, directive: str | None, pool: Any) -> Any:
    from ..mcp_server.server import build_server  # the MCP SDK only when serving: `kiwi run` must not pay its import

    if directive is not None:  # direct mode: the directive's tools, read now (an error stops start-up)
        from ..mcp_server.direct import build_direct_server

        direct = await build_direct_server(runner, directive, local_spaces=settings.serve_local_spaces)
        _say(direct.summary())
        return direct
    return build_server(
        runner,
        allow_command_writes=allow_command_writes,
        local_spaces=settings.serve_local_spaces,
        mcp_pool=pool,
    )


def _with_the_system_allocator() -> None:
    """Start this command again under PYTHONMALLOC=malloc, unless PYTHONMALLOC is set already.

    A shared server's MCP sessions come and go by the thousand, and what they freed should go
    back to the system (runner/mcp_server/http_sessions.py trims it). CPython's own small-object
    allocator keeps most of it, pinned by the few objects that outlive a burst of sessions
    (3,000 abandoned sessions kept 30 to 70 MB after they had all expired); with the system's
    allocator, glibc's malloc_trim returns nearly all of it. The allocator is chosen when the
    interpreter starts, so the command is started again, the same process (exec), before it
    has done anything. Only where the trim exists (glibc); PYTHONMALLOC=pymalloc keeps CPython's."""
    import platform

    if os.environ.get("PYTHONMALLOC") is not None or sys.flags.ignore_environment:
        return
    if platform.system() != "Linux" or platform.libc_ver()[0] != "glibc":
        return
    os.environ["PYTHONMALLOC"] = "malloc"
    sys.stdout.flush()
    sys.stderr.flush()
    os.execv(sys.executable, sys.orig_argv)


def _positive(kind: type[float] | type[int]) -> Any:
    """An argparse type: a finite number above 0 of `kind`, or an error naming what was given."""

    def parse(text: str) -> float | int:
        try:
            value = kind(text)
        except ValueError:
            raise argparse.ArgumentTypeError(f"not a {'whole ' if kind is int else ''}number: {text!r}") from None
        if not (0 < value < float("inf")):
            raise argparse.ArgumentTypeError(f"must be above 0 (and finite), not {text}")
        return value

    return parse


def _say(line: str) -> None:
    print(f"kiwi: {line}", file=sys.stderr, flush=True)


def _log_to_stderr() -> None:
    kiwi = logging.getLogger("kiwi")
    if not kiwi.handlers:
        handler = logging.StreamHandler(sys.stderr)
        handler.setFormatter(logging.Formatter("kiwi: %(message)s"))
        kiwi.addHandler(handler)
        kiwi.setLevel(logging.WARNING)


def main(argv: Sequence[str] | None = None) -> int:
    parser = argparse.ArgumentParser(prog="kiwi")
    add_serve_command(parser.add_subparsers(dest="command", required=True))
    args = parser.parse_args(["serve", *(sys.argv[1:] if argv is None else argv)])
    telemetry.start()
    try:
        return asyncio.run(args.handler(args))
    except KiwiError as e:
        print(f"kiwi: {e}", file=sys.stderr)
        return e.exit_code
    except KeyboardInterrupt:
        return 130


if __name__ == "__main__":
    sys.exit(main())
