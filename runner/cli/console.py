"""`kiwi console`: the web console for a person on their own machine.

    kiwi console                 # http://127.0.0.1:8766/console, until Ctrl-C
    kiwi console --port 0        # any free port (the URL is printed)

It binds 127.0.0.1 only and prints the URL; sign in there with what `kiwi token` prints (or a
hosted project's access token). Every page acts as the person signed in, never as this
process. A shared server serves the same console at /console of `kiwi serve --transport http`.
"""

from __future__ import annotations

import argparse
import sys
from typing import Any

from ..config import Settings

__all__ = ["add_console_command", "cmd_console"]

DEFAULT_PORT = 8766


def add_console_command(subparsers: Any) -> argparse.ArgumentParser:
    """Define `console` on a parser's subparsers."""
    parser: argparse.ArgumentParser = subparsers.add_parser(
        "console",
        help="serve the web console on this machine (127.0.0.1) and print its URL",
        description="Serve the web console (approvals, runs, the registry, MCP servers) at "
        "http://127.0.0.1:PORT/console for a person on this machine; sign in with `kiwi token`'s token.",
    )
    parser.add_argument(
        "--port", type=int, default=DEFAULT_PORT, help=f"the port (default {DEFAULT_PORT}; 0: any free one)"
    )
    parser.set_defaults(handler=cmd_console)
    return parser


async def cmd_console(args: argparse.Namespace) -> int:
    import uvicorn
    from starlette.applications import Starlette
    from starlette.responses import RedirectResponse
    from starlette.routing import Route

    from ..console import mounted_console
    from .listen import bind
    from .serve import _log_to_stderr

    _log_to_stderr()
    settings = Settings.load()
    sock = bind("127.0.0.1", args.port)
    try:
        mount, console = mounted_console(settings, allow_admin=False)

        async def front(_: Any) -> RedirectResponse:
            return RedirectResponse("/console/", status_code=303)

        app = Starlette(routes=[Route("/", endpoint=front), mount])
        port = sock.getsockname()[1]
        print(f"kiwi: the console is at http://127.0.0.1:{port}/console/", file=sys.stderr, flush=True)
        print("kiwi: sign in with the token `kiwi token` prints", file=sys.stderr, flush=True)
        config = uvicorn.Config(app, log_level="warning", lifespan="off", timeout_graceful_shutdown=5)
        try:
            await uvicorn.Server(config).serve(sockets=[sock])
        finally:
            await console.aclose()
    finally:
        sock.close()
    return 0
