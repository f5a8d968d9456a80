"""`kiwi serve`: Kiwi's MCP server (search, load, execute, help) over stdio or streamable HTTP.

    kiwi serve                                   # stdio, for an MCP client that spawns it
    kiwi serve --transport http --port 8765      # streamable HTTP at http://127.0.0.1:8765/mcp

Wire it into the kiwi CLI with `add_serve_command(sub)` on its subparsers; standalone:
`python -m runner.mcp.serve_cli --transport stdio`. Logs go to stderr (stdout is the
protocol on stdio). The registry and cache come from Settings (KIWI_DATABASE_URL, ...).
"""

from __future__ import annotations

import argparse
import asyncio
import logging
import sys
from collections.abc import Sequence
from typing import Any

from ..config import Settings
from ..errors import KiwiError
from ..registry import connect
from ..run import Runner

__all__ = ["add_serve_command", "cmd_serve", "main", "serve"]

logger = logging.getLogger("kiwi.mcp.serve")


def add_serve_command(subparsers: Any) -> argparse.ArgumentParser:
    """Define `serve` on a parser's subparsers (the object `add_subparsers()` returns)."""
    serve_parser: argparse.ArgumentParser = subparsers.add_parser(
        "serve",
        help="serve Kiwi over MCP (tools: search, load, execute, help)",
        description="Serve the Kiwi registry as an MCP server with the tools search, load, execute and help.",
    )
    serve_parser.add_argument(
        "--transport",
        choices=("stdio", "http"),
        default="stdio",
        help="stdio (default; the client spawns kiwi) or http (streamable HTTP at /mcp)",
    )
    serve_parser.add_argument("--host", default="127.0.0.1", help="http: the address to listen on (default 127.0.0.1)")
    serve_parser.add_argument("--port", type=int, default=8765, help="http: the port to listen on (default 8765)")
    serve_parser.set_defaults(handler=cmd_serve)
    return serve_parser


async def cmd_serve(args: argparse.Namespace) -> int:
    """The handler `kiwi` calls (async, like its other commands)."""
    await serve(args.transport, host=args.host, port=args.port)
    return 0


async def serve(transport: str, *, host: str = "127.0.0.1", port: int = 8765) -> None:
    from .server import build_server  # the MCP SDK only when serving: `kiwi run` must not pay its import

    _log_to_stderr()
    settings = Settings.load()
    runner = Runner(connect(settings), settings, on_progress=lambda line: logger.info("%s", line))
    server = build_server(runner)
    try:
        if transport == "stdio":
            await server.run_stdio_async()
        elif transport == "http":
            print(f"kiwi: serving MCP at http://{host}:{port}/mcp", file=sys.stderr, flush=True)
            await server.run_streamable_http_async(host=host, port=port)
        else:
            raise ValueError(f"unknown transport {transport!r}")
    finally:
        await runner.aclose()


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
    try:
        return asyncio.run(args.handler(args))
    except KiwiError as e:
        print(f"kiwi: {e}", file=sys.stderr)
        return e.exit_code
    except KeyboardInterrupt:
        return 130


if __name__ == "__main__":
    sys.exit(main())
